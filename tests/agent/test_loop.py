"""The agent loop in-process: a real manager, store and skill processes, a scripted model."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.agent import AgentRun, AgentService, RunStore
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill
from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.agent import OSCAR, agent_settings, envelope, run_agent
from tests.support.llm import FakeLLM, Reply, call
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import until

# Pretty-printed on purpose: the model must get these exact bytes, not a re-serialisation.
ODD_JSON = '{ "disk" : "sda",\n  "free_pct":  12.50 , "note": "caf\\u00e9 ✓" }'
VERBATIM = f"#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{ODD_JSON}'\n"
FAILING = "#!/bin/sh\ncat >/dev/null\necho 'cannot open /dev/sdz' >&2\nexit 3\n"
NOISY = """#!/bin/sh
cat >/dev/null
echo 'step one' >&2
echo '{"progress": 1, "total": 2, "message": "half way"}' >&2
echo 'step two' >&2
echo '{"ok": true}'
"""
ECHO = """#!/bin/sh
input=$(cat)
printf '%s\\n' "$input" >> calls.log
printf '%s\\n' "$input"
"""


def test_the_model_is_offered_what_the_persona_mode_permits(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("check_disk")
    make_skill("set_flag", **{"class": "mutating"})
    make_skill("wipe_disk", **{"class": "dangerous"})
    for mode in ("read-only", "mutating-with-confirm", "dual-sign-required"):
        write_persona(tmp_path / "personas", mode.replace("-", "_"), mode)
    write_persona(
        tmp_path / "personas", "narrow", "dual-sign-required", disallowed_tools=["wipe_*"]
    )
    settings = agent_settings(tmp_path, skills_root, fake)
    seen = {}
    for persona in ("read_only", "mutating_with_confirm", "dual_sign_required", "narrow"):
        fake.add(Reply("nothing to do"))
        outcome = run_agent(settings, "look around", persona)
        assert outcome.record.status == "done"
        seen[persona] = fake.tool_names(len(fake.requests) - 1)
    assert seen == {
        "read_only": ["check_disk"],
        "mutating_with_confirm": ["check_disk", "set_flag"],
        "dual_sign_required": ["check_disk", "set_flag", "wipe_disk"],
        "narrow": ["check_disk", "set_flag"],
    }
    # The caller's role applies too: a viewer's run is offered safe tools only.
    fake.add(Reply("nothing"))
    viewer = Principal("vera", Role.VIEWER)
    run_agent(settings, "look", "dual_sign_required", requester=viewer)
    assert fake.tool_names(len(fake.requests) - 1) == ["check_disk"]


def test_system_prompt_is_the_persona_body_with_instructions_skills_and_the_reminder_each_turn(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("check_disk")
    native = tmp_path / "native" / "runbook"
    native.mkdir(parents=True)
    (native / "SKILL.md").write_text(
        "---\nname: disk_runbook\ndescription: How to free disk space safely.\n---\nStep 1...\n"
    )
    write_persona(
        tmp_path / "personas",
        "responder",
        body="You are the first responder of ACME.",
        critical_reminder="Never delete anything under /var/lib/postgresql.",
    )
    settings = agent_settings(tmp_path, skills_root, fake, native_dirs=(str(tmp_path / "native"),))
    fake.add(Reply(calls=[call("check_disk")]), Reply("disk is fine"))
    outcome = run_agent(settings, "is the disk full?", "responder")
    assert outcome.record.final_answer == "disk is fine"
    assert len(fake.requests) == 2
    for n in (0, 1):
        system = fake.system(n)
        assert system.startswith("You are the first responder of ACME.")
        assert "disk_runbook: How to free disk space safely." in system
        assert system.endswith(
            "CRITICAL REMINDER: Never delete anything under /var/lib/postgresql."
        )
    assert fake.request(0)["model"] == "test-model"


def test_a_personas_model_wins_over_the_configured_default(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    write_persona(tmp_path / "personas", "picky", model="persona-model")
    fake.add(Reply("hi"))
    outcome = run_agent(agent_settings(tmp_path, skills_root, fake), "hello", "picky")
    assert fake.request(0)["model"] == "persona-model"
    assert outcome.record.model == "persona-model"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("flavour", ["openai", "anthropic"])
def test_a_tool_result_reaches_the_model_verbatim_in_the_next_request(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, flavour: str, stream: bool
) -> None:
    make_skill("check_disk", VERBATIM)
    with FakeLLM(
        [Reply("checking", [call("check_disk")]), Reply("12.5% free")], flavour=flavour
    ) as fake:
        settings = agent_settings(tmp_path, skills_root, fake, llm_stream=stream)
        outcome = run_agent(settings, "how much disk is free?")
        assert outcome.record.status == "done"
        assert outcome.record.final_answer == "12.5% free"
        assert fake.results_by_tool(1) == {"check_disk": ODD_JSON}
        assert fake.tool_names(0) == ["check_disk"]
    (tool,) = outcome.tool_messages()
    assert tool["content"] == ODD_JSON and tool["status"] == "succeeded"
    assert [m["role"] for m in outcome.body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    types = outcome.types()
    assert types[0] == "message" and types[-1] == "done"
    assert types.index("tool_start") < types.index("tool_end")


def test_a_failing_call_reaches_the_model_as_the_error_envelope(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("check_disk", FAILING)
    fake.add(Reply(calls=[call("check_disk")]), Reply("the disk is gone"))
    outcome = run_agent(agent_settings(tmp_path, skills_root, fake), "check the disk")
    got = envelope(fake.results_by_tool(1)["check_disk"])
    assert got["error"]["code"] == "exit_status"
    assert got["exit_code"] == 3
    assert "cannot open /dev/sdz" in got["stderr_tail"]
    assert outcome.tool_messages()[0]["status"] == "failed"
    assert outcome.tool_messages()[0]["is_error"] is True


def test_calls_refused_before_running_get_envelopes_and_are_audited(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    make_skill("check_disk", schema=schema)
    make_skill("set_flag", **{"class": "mutating"})
    fake.add(
        Reply(
            calls=[
                call("set_flag"),  # mutating: not offered to the read-only default persona
                call("no_such_tool"),
                call("check_disk", '{"path": '),  # broken JSON
                call("check_disk", {"path": 7}),  # against the schema
            ]
        ),
        Reply("I give up"),
    )
    settings = agent_settings(tmp_path, skills_root, fake)
    outcome = run_agent(settings, "do things")
    results = [envelope(c) for c in fake.tool_results(1).values()]
    codes = sorted(r["error"]["code"] for r in results)
    assert codes == ["invalid_args", "invalid_args", "not_offered", "not_offered"]
    schema_error = next(r for r in results if r["error"].get("details"))
    assert schema_error["error"]["details"][0]["pointer"] == "/path"
    assert outcome.record.final_answer == "I give up"
    assert not (skills_root / "set-flag" / "calls.log").exists()
    store = open_store(settings.data_dir)
    try:
        actions = [e["action"] for e in store.audit.entries(limit=100)]
        assert actions.count("agent.tool_refused") == 3  # the schema violation: by the manager
        assert "execution.invalid_args" in actions
    finally:
        store.close()


def test_the_calls_of_one_turn_run_concurrently(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    slow = "#!/bin/sh\ncat >/dev/null\nsleep 1\necho '{\"done\": true}'\n"
    for name in ("slow_a", "slow_b", "slow_c"):
        make_skill(name, slow)
    fake.add(Reply(calls=[call("slow_a"), call("slow_b"), call("slow_c")]), Reply("all done"))
    settings = agent_settings(tmp_path, skills_root, fake)
    started = time.monotonic()
    outcome = run_agent(settings, "run them")
    elapsed = time.monotonic() - started
    assert outcome.record.final_answer == "all done"
    assert [m["status"] for m in outcome.tool_messages()] == ["succeeded"] * 3
    assert elapsed < 2.5, f"three 1 s calls took {elapsed:.1f} s: not concurrent"
    assert len(fake.tool_results(1)) == 3


def test_stderr_and_progress_of_a_call_stream_into_the_runs_events(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("noisy", NOISY)
    fake.add(Reply(calls=[call("noisy")]), Reply("ok"))
    outcome = run_agent(agent_settings(tmp_path, skills_root, fake), "go")
    lines = [e.data["line"] for e in outcome.events if e.type == "stderr"]
    assert lines == ["step one", "step two"]
    progress = [e.data for e in outcome.events if e.type == "progress"]
    assert progress[0]["progress"] == 1 and progress[0]["message"] == "half way"
    assert all(e.data["tool"] == "noisy" for e in outcome.events if e.type == "stderr")


def test_with_many_skills_the_model_must_search_before_it_can_call_one(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    for n in range(100):
        make_skill(
            f"gadget_{n:03d}",
            description=f"Calibrate the {'flux' if n == 42 else 'plain'} gadget number {n:03d}.",
        )
    fake.add(
        Reply(calls=[call("gadget_042"), call("search_skills", {"query": "flux gadget"})]),
        Reply(calls=[call("gadget_042")]),
        Reply("calibrated"),
    )
    settings = agent_settings(tmp_path, skills_root, fake, bundled_skills=True)
    outcome = run_agent(settings, "calibrate the flux gadget")
    assert outcome.record.final_answer == "calibrated"
    first = fake.tool_names(0)
    assert "search_skills" in first
    assert not [n for n in first if n.startswith("gadget_")]
    assert "search_skills" in fake.system(0)
    refused = envelope(fake.results_by_tool(1)["gadget_042"])
    assert refused["error"]["code"] == "not_offered"
    found = envelope(fake.results_by_tool(1)["search_skills"])
    assert found["results"][0]["name"] == "gadget_042"
    second = fake.tool_names(1)
    assert "gadget_042" in second
    assert len([n for n in second if n.startswith("gadget_")]) <= 10
    assert fake.results_by_tool(2)["gadget_042"] == '{"ok": true}'


def test_the_run_stops_at_max_turns_and_says_so(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("check_disk")
    write_persona(tmp_path / "personas", "brief", max_turns=3)
    for n in range(5):
        fake.add(Reply(f"turn {n}", [call("check_disk")]))
    outcome = run_agent(agent_settings(tmp_path, skills_root, fake), "loop forever", "brief")
    assert outcome.record.status == "max_turns"
    assert outcome.record.turns == 3
    assert len(fake.requests) == 3
    assert outcome.record.error is not None
    assert "max_turns (3)" in outcome.record.error.message
    done = outcome.events[-1]
    assert done.type == "done" and done.data["status"] == "max_turns"
    assert len(outcome.tool_messages()) == 3


def test_a_provider_failure_fails_the_run_with_the_clear_error(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    fake.add(Reply(status=401, error="bad key"))
    outcome = run_agent(agent_settings(tmp_path, skills_root, fake), "hello")
    assert outcome.record.status == "failed"
    assert outcome.record.error is not None
    assert outcome.record.error.code == "provider_auth"
    assert outcome.record.error.message.startswith("provider rejected the API key")
    assert outcome.events[-1].data["error"]["code"] == "provider_auth"


def test_a_mutating_call_waits_for_approval_and_a_rejection_reaches_the_model(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    folder = make_skill("set_flag", ECHO, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    fake.add(Reply(calls=[call("set_flag", {"flag": "maintenance"})]), Reply("it was refused"))
    statuses: list[str] = []

    async def reject(manager: Manager, service: AgentService, run: AgentRun) -> None:
        await until(lambda: run.pending, "the call to wait for approval")
        statuses.append(service.get(run.id).status)
        execution = manager.store.executions.get(next(iter(run.pending)))
        assert execution is not None and execution.approval_id is not None
        approval = manager.desk.get(execution.approval_id)
        assert approval.requested_by == f"agent:{run.id}"
        assert approval.args == {"flag": "maintenance"}
        await manager.desk.reject(execution.approval_id, OSCAR, "not during business hours")

    settings = agent_settings(tmp_path, skills_root, fake)
    outcome = run_agent(settings, "set maintenance", "fixer", during=reject)
    assert statuses == ["waiting_approval"]
    assert outcome.record.status == "done"
    assert outcome.record.final_answer == "it was refused"
    got = envelope(fake.results_by_tool(1)["set_flag"])
    assert got["error"] == {"code": "rejected", "message": "not during business hours"}
    assert not (folder / "calls.log").exists()
    assert "approval_pending" in outcome.types()
    roles = [m["role"] for m in outcome.body["messages"]]
    assert roles == ["user", "assistant", "pending", "tool", "assistant"]


def test_at_a_terminal_a_call_with_invalid_args_is_not_offered_for_confirmation(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    schema = {"type": "object", "properties": {"flag": {"type": "string"}}, "required": ["flag"]}
    folder = make_skill("set_flag", ECHO, schema=schema, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    fake.add(
        Reply(calls=[call("set_flag", {"flag": 7})]),  # against the schema: never asked
        Reply(calls=[call("set_flag", {"flag": "maintenance"})]),  # valid: asked, declined
        Reply("nothing was changed"),
    )
    asked: list[tuple[str, Any]] = []

    async def confirm(skill: Skill, args: Any) -> bool:
        asked.append((skill.name, args))
        return False

    settings = agent_settings(tmp_path, skills_root, fake)
    outcome = run_agent(settings, "set maintenance", "fixer", confirm=confirm)
    assert outcome.record.final_answer == "nothing was changed"
    assert asked == [("set_flag", {"flag": "maintenance"})]
    invalid = envelope(fake.results_by_tool(1)["set_flag"])
    assert invalid["error"]["code"] == "invalid_args"
    assert invalid["error"]["details"][0]["pointer"] == "/flag"
    declined = envelope(fake.results_by_tool(2)["set_flag"])
    assert declined["error"]["code"] == "rejected"
    assert [m["status"] for m in outcome.tool_messages()] == ["invalid_args", "rejected"]
    assert "pending" not in [m["role"] for m in outcome.body["messages"]]
    assert not (folder / "calls.log").exists()


def test_the_run_and_its_transcript_and_events_are_stored(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("check_disk", VERBATIM)
    fake.add(Reply(calls=[call("check_disk")]), Reply("fine"))
    settings = agent_settings(tmp_path, skills_root, fake)
    outcome = run_agent(settings, "check")
    store = open_store(settings.data_dir)
    try:
        runs = RunStore(store)
        record = runs.get(outcome.record.id)
        assert record is not None and record.status == "done" and record.final_answer == "fine"
        assert [m.role for m in runs.messages(record.id)] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert runs.messages(record.id)[2].content["content"] == ODD_JSON
        events = runs.events(record.id)
        assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
        assert events[-1][1].type == "done"
        assert [e.type for _, e in events] == outcome.types()
        actions = [e["action"] for e in store.audit.entries(limit=50)]
        assert "agent.run_started" in actions and "agent.run_finished" in actions
        started = next(
            e for e in store.audit.entries(limit=50) if e["action"] == "execution.started"
        )
        assert started["actor"] == f"agent:{record.id}"
    finally:
        store.close()
    assert json.loads(json.dumps(outcome.body))["messages"][0]["text"] == "check"


def test_a_rate_limited_provider_is_retried_and_the_run_carries_on(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("check_disk")
    busy = Reply(status=429, error="rate limited", headers={"retry-after-ms": "20"})
    fake.add(Reply(calls=[call("check_disk")]), busy, Reply("fine after all"))
    settings = agent_settings(tmp_path, skills_root, fake, llm_max_retries=2)
    outcome = run_agent(settings, "check")
    assert outcome.record.status == "done"
    assert outcome.record.final_answer == "fine after all"
    assert len(fake.requests) == 3
    assert fake.request(1)["messages"] == fake.request(2)["messages"]  # the same turn, resent
