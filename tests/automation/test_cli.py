"""``ongrid-skills triggers …`` and ``schedules …`` against a real ``serve`` (one per module)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_skill


def _skills(root: Path) -> None:
    write_skill(root, "report", "#!/bin/sh\ncat\n", **{"class": "safe"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = serve_for_cli(tmp_path_factory.mktemp("cli"), _skills)
    try:
        yield served
    finally:
        stop(served.process)


def test_triggers_set_prints_the_token_once_and_the_token_works(
    served: Served, tmp_path: Path
) -> None:
    doc = tmp_path / "trigger.json"
    doc.write_text(json.dumps({"rules": [{"name": "r", "skill": "report", "args": {}}]}))
    created = served.cli("triggers", "set", "cpu", "--file", str(doc), who="admin")
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("ogt_") and "\n" not in token
    answer = httpx.post(
        f"{served.url}/v1/triggers/cpu",
        json={"labels": {"alertname": "CPU"}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200 and answer.json()["started"][0]["kind"] == "call"
    listed = served.cli("triggers", "list", "-o", "json", who="olga")
    assert [t["name"] for t in json.loads(listed.stdout)["items"]] == ["cpu"]
    table = served.cli("triggers", "list", who="olga")
    assert "cpu" in table.stdout and "call" in table.stdout
    rotated = served.cli("triggers", "token", "cpu", who="admin").stdout.strip()
    assert rotated.startswith("ogt_") and rotated != token
    refused = served.cli("triggers", "set", "cpu", "--file", str(doc), who="olga")
    assert refused.exit_code == 3, refused.output


def test_schedules_set_list_pause_run_and_delete(served: Served, tmp_path: Path) -> None:
    doc = tmp_path / "schedule.json"
    doc.write_text(json.dumps({"cron": "0 7 * * *", "timezone": "Europe/Paris", "skill": "report"}))
    saved = served.cli("schedules", "set", "morning", "--file", str(doc), who="admin")
    assert saved.exit_code == 0 and "next firing" in saved.stderr, saved.output
    paused = served.cli("schedules", "pause", "morning", who="admin")
    assert json.loads(paused.stdout)["paused"] is True
    listed = served.cli("schedules", "list", who="olga")
    assert "morning" in listed.stdout and "paused" in listed.stdout
    fired = json.loads(served.cli("schedules", "run", "morning", who="admin").stdout)
    assert served.final(fired["target_id"])["requested_by"] == "schedule:morning"
    assert served.cli("schedules", "delete", "morning", who="admin").exit_code == 0
    assert served.cli("schedules", "show", "morning", who="olga").exit_code == 2
