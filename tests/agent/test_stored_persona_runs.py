"""An agent run as a persona written at run time (``POST /v1/personas``), on a real app and a
scripted model: the run gets the stored prompt and tool lists at once, and an edit at its next
run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.settings import Settings
from tests.support.agent import agent_settings
from tests.support.llm import FakeLLM, Reply
from tests.support.server import Server
from tests.support.skills import MakeSkill

NIGHT: dict[str, Any] = {
    "name": "night_watch",
    "description": "Watches the night shift.",
    "when_to_use": "At night.",
    "permission_mode": "mutating-with-confirm",
    "tools": ["check_*", "set_flag"],
    "critical_reminder": "Never flip a flag at night.",
    "prompt": "You are the night watch.",
}


@pytest.fixture
def server_skills(make_skill: MakeSkill) -> None:
    make_skill("check_disk")
    make_skill("check_load")
    make_skill("set_flag", **{"class": "mutating"})


@pytest.fixture
def server_settings(
    tmp_path: Path, skills_root: Path, server_skills: None, fake: FakeLLM
) -> Settings:
    return agent_settings(tmp_path, skills_root, fake)


def answered(server: Server, message: str) -> dict[str, Any]:
    body = {"persona": "night_watch", "message": message, "wait": True}
    response = server.call("POST", "/v1/agent/runs", "olga", json=body)
    assert response.status_code == 200, response.text
    run: dict[str, Any] = response.json()
    assert run["status"] == "done", run
    return run


def test_a_run_as_a_stored_persona_gets_its_prompt_and_tools_and_then_its_edit(
    server: Server, fake: FakeLLM
) -> None:
    assert server.call("POST", "/v1/personas", json=NIGHT).status_code == 201
    fake.add(Reply(text="All quiet."))
    assert answered(server, "anything wrong?")["persona"] == "night_watch"
    assert "You are the night watch." in fake.system(0)
    assert "Never flip a flag at night." in fake.system(0)
    assert sorted(fake.tool_names(0)) == ["check_disk", "check_load", "set_flag"]

    edit = {**NIGHT, "tools": ["check_disk"], "prompt": "You are the quiet night watch."}
    assert server.call("PUT", "/v1/personas/night_watch", json=edit).status_code == 200
    fake.add(Reply(text="Still quiet."))
    answered(server, "and now?")
    assert "You are the quiet night watch." in fake.system(1)
    assert fake.tool_names(1) == ["check_disk"]
