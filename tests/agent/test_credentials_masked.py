"""The agent's model never sees a credential a tool was given: the tool result it receives, the
run's transcript and its events hold ``***`` where the skill printed the secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.settings import Settings
from tests.support.agent import agent_settings
from tests.support.llm import FakeLLM, Reply, call
from tests.support.server import Server
from tests.support.skills import MakeSkill
from tests.support.waiting import wait_for

SECRET = "agent-visible-never-42"
SLOT = {"slot": "api", "fields": ["token"], "inject": {"env": {"API_TOKEN": "{{token}}"}}}
PRINTS = """#!/bin/sh
cat >/dev/null
echo "token is $API_TOKEN" >&2
printf '{"token": "%s"}\\n' "$API_TOKEN"
"""


@pytest.fixture
def server_settings(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> Settings:
    make_skill("whoami", PRINTS, credentials=[SLOT])
    return agent_settings(tmp_path, skills_root, fake)


def test_the_model_and_the_transcript_get_the_masked_result(server: Server, fake: FakeLLM) -> None:
    made = server.call(
        "POST", "/v1/credentials", "admin", json={"name": "api", "values": {"token": SECRET}}
    )
    assert made.status_code == 201, made.text
    bound = server.call(
        "POST", "/v1/credentials/api/bind", "admin", json={"slot": "api", "skill": "whoami"}
    )
    assert bound.status_code == 200, bound.text
    fake.add(Reply(calls=[call("whoami", {})]), Reply("It is masked."))
    started = server.call("POST", "/v1/agent/runs", "olga", json={"message": "who am I?"})
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]

    def done() -> dict[str, Any] | None:
        body: dict[str, Any] = server.call("GET", f"/v1/agent/runs/{run_id}", "olga").json()
        return body if body["status"] == "done" else None

    final = wait_for(done, "the run to end")
    assert fake.results_by_tool(1) == {"whoami": '{"token": "***"}'}
    events = server.call("GET", f"/v1/agent/runs/{run_id}/events", "olga").text
    seen = json.dumps(fake.requests) + json.dumps(final) + events
    assert SECRET not in seen
    assert "token is ***" in events
