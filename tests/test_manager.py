"""The manager's one submit path: an Idempotency-Key binds the whole request, not only the args."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import make_settings
from tests.support.server import Server, running_app
from tests.support.skills import MakeSkill


def logging_script(log: Path, name: str) -> str:
    return f"#!/bin/sh\ncat >/dev/null\necho {name} >> {log}\necho '{{\"ok\": true}}'\n"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs.log"


@pytest.fixture
def server(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, runs: Path
) -> Iterator[Server]:
    make_skill("first_skill", logging_script(runs, "first"))
    make_skill("second_skill", logging_script(runs, "second"))
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "pm.md").write_text(
        "---\nname: pm\ndescription: PM.\nwhen_to_use: Tests.\n---\nYou are pm.\n"
    )
    with running_app(make_settings(tmp_path, skills_root)) as srv:
        yield srv


def post(server: Server, skill: str, body: dict[str, Any], key: str) -> tuple[int, Any]:
    headers = {**server.as_("olga"), "Idempotency-Key": key}
    response = server.client.post(f"/v1/skills/{skill}/execute", json=body, headers=headers)
    return response.status_code, response.json()


def test_an_idempotency_key_reused_on_another_skill_is_a_conflict_and_runs_nothing(
    server: Server, runs: Path
) -> None:
    status, first = post(server, "first_skill", {"args": {}}, "key-1")
    assert (status, first["status"]) == (200, "succeeded")
    status, body = post(server, "second_skill", {"args": {}}, "key-1")
    assert status == 409
    assert body["error"]["code"] == "conflict"
    assert "another request" in body["error"]["message"]
    assert runs.read_text() == "first\n"


def test_an_idempotency_key_reused_with_another_persona_is_a_conflict(
    server: Server, runs: Path
) -> None:
    assert post(server, "first_skill", {"args": {}}, "key-2")[0] == 200
    status, body = post(server, "first_skill", {"args": {}, "persona": "pm"}, "key-2")
    assert status == 409
    assert body["error"]["code"] == "conflict"
    status, again = post(server, "first_skill", {"args": {}}, "key-2")
    assert (status, again["status"]) == (200, "succeeded")
    assert runs.read_text() == "first\n"


def test_an_outcome_a_client_was_given_is_already_committed_for_any_other_reader(
    server: Server, tmp_path: Path
) -> None:
    """Group commit batches outcomes, but the answer waits for the commit: a crash right after
    the answer cannot leave the store saying something else than the client was told."""
    import sqlite3

    for n in range(5):
        status, body = post(server, "first_skill", {"args": {}}, f"commit-{n}")
        assert (status, body["status"]) == (200, "succeeded")
        # A plain connection, as another process sees the file: no flush of this process.
        with sqlite3.connect(tmp_path / "data" / "ongrid.db") as conn:
            row = conn.execute("SELECT status FROM executions WHERE id = ?", (body["id"],))
            assert row.fetchone() == ("succeeded",)
            audit = conn.execute(
                "SELECT action FROM audit_entries WHERE subject = ? ORDER BY seq", (body["id"],)
            )
            assert [action for (action,) in audit] == ["execution.started", "execution.finished"]
