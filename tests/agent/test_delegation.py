"""Delegation: a persona's ``delegate`` call runs a child run as another persona (SPEC §19).

Each test drives a real run on a real manager and store, its model a scripted OpenAI-compatible
server on loopback with one scripted conversation per persona (``PersonaScripts``).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.agent import AgentRun, AgentService, RunRecord, RunStatus
from ongrid_skills.errors import Conflict
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.runtime import open_manager
from ongrid_skills.types import Role
from tests.support.agent import Outcome, agent_settings, envelope, run_agent
from tests.support.llm import FakeLLM, PersonaScripts, Reply, call
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import wait_for

COORDINATOR = "You are a coordinator"


@pytest.fixture
def team(tmp_path: Path, make_skill: MakeSkill) -> None:
    make_skill("check_disk")
    make_skill("set_flag", **{"class": "mutating"})
    personas = tmp_path / "personas"
    write_persona(personas, "lead", "mutating-with-confirm", can_delegate=True)
    write_persona(personas, "inspector", "read-only")
    write_persona(personas, "sublead", "read-only", can_delegate=True)
    write_persona(personas, "fixer", "mutating-with-confirm", can_delegate=True, max_turns=1)


def child_events(events: list[Any]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == "child"]


def tool_results(outcome: Outcome, run_id: str) -> dict[str, str]:
    """tool name → its result, of a delegated run, from the parent's forwarded ``tool_end``s."""
    return {
        e["data"]["tool"]: e["data"]["content"]
        for e in child_events(outcome.events)
        if e["run_id"] == run_id and e["event"] == "tool_end"
    }


def test_a_specialist_with_a_stricter_mode_is_refused_inside_the_child_a_tool_it_may_not_use(
    tmp_path: Path, skills_root: Path, fake: FakeLLM, team: None
) -> None:
    scripts = PersonaScripts(
        fake,
        {
            "lead": [
                Reply(calls=[call("delegate", {"persona": "inspector", "task": "check db-01"})]),
                Reply("db-01 has room."),
            ],
            "inspector": [
                Reply("Looking.", [call("set_flag", {"flag": "x"}), call("check_disk")]),
                Reply("The disk of db-01 has room."),
            ],
        },
    )
    outcome = run_agent(agent_settings(tmp_path, skills_root, fake), "is db-01 full?", "lead")

    assert outcome.record.status is RunStatus.DONE
    assert outcome.record.final_answer == "db-01 has room."
    # The lead may delegate and mutate; its catalogue lists the others, not itself.
    assert "delegate" in scripts.tools("lead") and "set_flag" in scripts.tools("lead")
    catalogue = scripts.system("lead")
    for name in ("inspector", "fixer", "sublead", "coordinator", "default"):
        assert f"- {name} (" in catalogue
    assert "- lead (" not in catalogue
    # The read-only inspector is offered neither the mutating tool nor delegate...
    offered = scripts.tools("inspector")
    assert "check_disk" in offered and "set_flag" not in offered and "delegate" not in offered
    # ...and its call of it anyway is refused inside the child; the safe one runs.
    results = scripts.results("inspector", 1)
    assert envelope(results["set_flag"])["error"]["code"] == "not_offered"
    assert "error" not in results["check_disk"]
    # The child's answer is the delegate call's result.
    assert scripts.results("lead", 1) == {"delegate": "The disk of db-01 has room."}
    # The child is a run of its own, linked both ways.
    (child,) = outcome.body["children"]
    assert child["persona"] == "inspector" and child["depth"] == 1
    assert child["parent_run_id"] == outcome.record.id and child["status"] == "done"
    # Its events are in the parent's timeline, scoped and named.
    forwarded = child_events(outcome.events)
    assert {e["run_id"] for e in forwarded} == {child["id"]}
    assert {e["persona"] for e in forwarded} == {"inspector"}
    starts = [e for e in forwarded if e["event"] == "tool_start"]
    assert [e["data"]["tool"] for e in starts] == ["set_flag", "check_disk"]
    assert all(e["data"]["call_id"].startswith(f"child:{child['id']}:") for e in starts)
    assert {e["parent_call_id"] for e in forwarded} == {child["parent_call_id"]}
    assert forwarded[-1]["event"] == "done"
    assert outcome.types()[-1] == "done"


def test_delegation_stops_at_depth_two_and_a_grandchild_gets_only_what_every_ancestor_may_use(
    tmp_path: Path, skills_root: Path, fake: FakeLLM, team: None
) -> None:
    forged = call("delegate", {"persona": "inspector", "task": "go deeper"})
    scripts = PersonaScripts(
        fake,
        {
            "lead": [
                Reply(calls=[call("delegate", {"persona": "sublead", "task": "plan it"})]),
                Reply("Planned."),
            ],
            "sublead": [
                Reply(calls=[call("delegate", {"persona": "fixer", "task": "fix it"})]),
                Reply("The fixer could not go deeper."),
            ],
            "fixer": [Reply("Trying.", [forged, call("set_flag", {"flag": "y"})])],
        },
    )
    outcome = run_agent(agent_settings(tmp_path, skills_root, fake), "fix db-01", "lead")

    assert outcome.record.status is RunStatus.DONE
    assert "delegate" in scripts.tools("sublead")  # depth 1 may still delegate
    grandchild = scripts.tools("fixer")
    # Depth 2: no delegate; and set_flag is gone, since the read-only sublead could not use it.
    assert "delegate" not in grandchild and "set_flag" not in grandchild
    grandchild_runs = [e for e in child_events(outcome.events) if e["depth"] == 2]
    assert grandchild_runs
    results = tool_results(outcome, grandchild_runs[0]["run_id"])
    refused = envelope(results["delegate"])["error"]
    assert refused["code"] == "depth_limit" and "at most 2 levels" in refused["message"]
    assert envelope(results["set_flag"])["error"]["code"] == "not_offered"
    # The grandchild's own max_turns (1) ends it before a second turn: the sublead reads why.
    assert len(scripts.requests["fixer"]) == 1
    ended = envelope(scripts.results("sublead", 1)["delegate"])["error"]
    assert ended["code"] == "max_turns" and ended["details"]["persona"] == "fixer"
    assert ended["details"]["final_answer"] == "Trying."
    # The grandchild's events reach the top run's timeline, nested under the child's call.
    forwarded = child_events(outcome.events)
    (sublead_run,) = outcome.body["children"]
    deep = [e for e in forwarded if e["depth"] == 2]
    assert deep and {e["persona"] for e in deep} == {"fixer"}
    assert all(e["parent_call_id"].startswith(f"child:{sublead_run['id']}:") for e in deep)
    scoped = {e["data"]["call_id"] for e in forwarded if e["event"] == "tool_start"}
    assert {e["parent_call_id"] for e in deep} <= scoped


def test_an_unknown_persona_or_one_the_principal_may_not_use_is_a_tool_error_and_nothing_runs(
    tmp_path: Path, skills_root: Path, fake: FakeLLM, team: None
) -> None:
    scripts = PersonaScripts(
        fake,
        {
            "coordinator": [
                Reply(
                    calls=[
                        call("delegate", {"persona": "nobody", "task": "x"}),
                        call("delegate", {"persona": "fixer", "task": "set y"}),
                    ]
                ),
                Reply("Nobody could help."),
            ]
        },
        coordinator=COORDINATOR,
    )
    viewer = Principal("vic", Role.VIEWER)
    settings = agent_settings(tmp_path, skills_root, fake)
    outcome = run_agent(settings, "fix it", "coordinator", requester=viewer)

    assert outcome.record.status is RunStatus.DONE
    # A viewer's coordinator lists only the read-only personas it may use.
    assert "- inspector (" in scripts.system("coordinator")
    assert "- fixer (" not in scripts.system("coordinator")
    results = scripts.results("coordinator", 1)
    assert envelope(results["delegate"])["error"]["code"] in ("unknown_persona", "forbidden")
    codes = sorted(
        envelope(m["content"])["error"]["code"]
        for m in outcome.tool_messages()
        if m["name"] == "delegate"
    )
    assert codes == ["forbidden", "unknown_persona"]
    assert outcome.body["children"] == []


def test_stopping_the_parent_while_its_child_runs_ends_both_cancelled(
    tmp_path: Path, skills_root: Path, fake: FakeLLM, team: None
) -> None:
    release = threading.Event()

    def slow(_body: dict[str, Any]) -> Reply:
        release.wait(20)  # the child's model is thinking when the parent is stopped
        return Reply("Too late.")

    PersonaScripts(
        fake,
        {
            "lead": [Reply(calls=[call("delegate", {"persona": "inspector", "task": "look"})])],
            "inspector": [slow],
        },
    )
    seen: dict[str, str] = {}

    async def stop(_m: Manager, service: AgentService, run: AgentRun) -> None:
        await asyncio.to_thread(fake.wait_requests, 2)
        (child,) = service.runs.children(run.id)
        seen["child"] = child.id
        assert child.status is RunStatus.RUNNING
        await service.cancel(run.id, Principal("olga", Role.OPERATOR))
        # A delegated run is continued through its parent, never on its own.
        with pytest.raises(Conflict, match="delegated by run"):
            service.send(child.id, "go on", Principal("olga", Role.OPERATOR))

    try:
        settings = agent_settings(tmp_path, skills_root, fake)
        outcome = run_agent(settings, "look at db-01", "lead", during=stop)
    finally:
        release.set()
    assert outcome.record.status is RunStatus.CANCELLED
    (child,) = outcome.body["children"]
    assert child["id"] == seen["child"] and child["status"] == "cancelled"
    assert child["error"]["code"] == "cancelled"
    ends = [e for e in child_events(outcome.events) if e["event"] == "done"]
    assert [e["data"]["status"] for e in ends] == ["cancelled"]


def test_a_server_stopping_while_a_child_waits_withdraws_its_request_and_ends_both_runs(
    tmp_path: Path, skills_root: Path, fake: FakeLLM, team: None
) -> None:
    PersonaScripts(
        fake,
        {
            "lead": [Reply(calls=[call("delegate", {"persona": "fixer", "task": "flag it"})])],
            "fixer": [Reply(calls=[call("set_flag", {"flag": "z"})])],
        },
    )
    settings = agent_settings(tmp_path, skills_root, fake)

    async def main() -> tuple[RunRecord, RunRecord, str]:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            service = AgentService(manager, poll_seconds=0.05, resumable=True)
            run = service.start("lead", Principal("olga", Role.OPERATOR), "flag it")

            def waiting() -> RunRecord | None:
                children = service.runs.children(run.id)
                ready = children and children[0].status is RunStatus.WAITING_APPROVAL
                return children[0] if ready else None

            child = await asyncio.to_thread(wait_for, waiting, "the child to wait")
            await service.close()  # as serve does when it stops
            (execution,), _next = manager.store.executions.page(limit=5)
            return service.get(run.id), service.get(child.id), execution.status.value

    parent, child, execution_status = asyncio.run(main())
    # The parent waited on its child: neither is kept waiting for a next start.
    assert parent.status is RunStatus.INTERRUPTED
    assert child.status is RunStatus.INTERRUPTED
    assert execution_status == "cancelled"
