"""Delegated runs as the doors show them: the parent's REST event stream carries the child's
events (its approval card included), and ``chat`` shows them nested on the terminal."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ongrid_skills.settings import Settings
from tests.agent.test_cli_chat import chat, environ
from tests.agent.test_rest import ECHO, EventReader, run_of, start
from tests.support.agent import agent_settings
from tests.support.llm import FakeLLM, PersonaScripts, Reply, call
from tests.support.server import Server
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import wait_for


@pytest.fixture
def server_skills(tmp_path: Path, make_skill: MakeSkill) -> None:
    make_skill("check_disk")
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "lead", "mutating-with-confirm", can_delegate=True)
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    write_persona(tmp_path / "personas", "inspector", "read-only")


@pytest.fixture
def server_settings(
    tmp_path: Path, skills_root: Path, server_skills: None, fake: FakeLLM
) -> Settings:
    return agent_settings(tmp_path, skills_root, fake)


def test_a_childs_call_waits_for_approval_and_its_events_reach_the_parents_sse_stream(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    PersonaScripts(
        fake,
        {
            "lead": [
                Reply(calls=[call("delegate", {"persona": "fixer", "task": "flag db-01"})]),
                Reply("The fixer flagged db-01."),
            ],
            "fixer": [Reply(calls=[call("set_flag", {"flag": "db-01"})]), Reply("Flagged.")],
        },
    )
    run_id = start(server, persona="lead", message="flag db-01 for maintenance")
    reader = EventReader(server, run_id)
    reader.start()
    # The child's mutating call waits for a confirmation like any call; nothing ran yet.
    (approval,) = wait_for(
        lambda: server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"],
        "the child's request",
    )
    (child,) = run_of(server, run_id)["children"]
    assert approval["requested_by"] == f"agent:{child['id']}" and approval["skill"] == "set_flag"
    assert child["persona"] == "fixer" and child["status"] == "waiting_approval"
    assert not (skills_root / "set-flag" / "calls.log").exists()
    approved = server.call("POST", f"/v1/approvals/{approval['id']}/approve", "oscar")
    assert approved.status_code == 200, approved.text
    final = wait_for(lambda: (b := run_of(server, run_id))["status"] == "done" and b, "the end")
    reader.join(timeout=15)
    assert final["final_answer"] == "The fixer flagged db-01."
    assert (skills_root / "set-flag" / "calls.log").read_text() == '{"flag":"db-01"}\n'
    # The child's run is its own, linked to its parent, with its own transcript.
    shown = run_of(server, child["id"])
    assert shown["parent_run_id"] == run_id and shown["final_answer"] == "Flagged."
    assert [m["role"] for m in shown["messages"]] == [
        "user",
        "assistant",
        "pending",
        "tool",
        "assistant",
    ]
    # The parent's stream: its own events, and the child's as ``child`` events, in order.
    forwarded = [data for kind, data in reader.events if kind == "child"]
    kinds = [data["event"] for data in forwarded]
    for kind in ("message", "tool_start", "approval_pending", "stderr", "tool_end", "done"):
        assert kind in kinds, kinds
    pause = next(d for d in forwarded if d["event"] == "approval_pending")
    assert pause["data"]["approval_id"] == approval["id"] and pause["persona"] == "fixer"
    assert pause["data"]["call_id"].startswith(f"child:{child['id']}:")
    types = reader.types()
    assert types[-1] == "done" and types.count("done") == 1
    delegate_end = max(i for i, (k, d) in enumerate(reader.events) if k == "tool_end")
    assert reader.events[delegate_end][1]["content"] == "Flagged."
    assert max(i for i, (k, _) in enumerate(reader.events) if k == "child") < delegate_end


def test_chat_on_the_terminal_shows_the_childs_events_nested_with_its_persona(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("check_disk")
    write_persona(tmp_path / "personas", "inspector", "read-only")
    PersonaScripts(
        fake,
        {
            "coordinator": [
                Reply(calls=[call("delegate", {"persona": "inspector", "task": "check db-01"})]),
                Reply("db-01 is fine."),
            ],
            "inspector": [Reply(calls=[call("check_disk")]), Reply("Plenty of room.")],
        },
        coordinator="You are a coordinator",
    )
    done: subprocess.CompletedProcess[str] = chat(
        environ(tmp_path, skills_root, fake), "--persona", "coordinator", "-m", "is db-01 ok?"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "db-01 is fine.\n"
    lines = done.stderr.splitlines()
    assert any(line.startswith("⚙ delegate ") for line in lines), done.stderr
    assert any(line.startswith("  ↳ [inspector] task (run ") for line in lines), done.stderr
    assert any(line.startswith("  ↳ [inspector] ⚙ check_disk") for line in lines), done.stderr
    assert any(line.startswith("  ↳ [inspector] ✓ check_disk") for line in lines), done.stderr
    assert any("✓ delegate" in line and "Plenty of room." in line for line in lines)
