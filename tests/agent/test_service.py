"""The agent service's door-neutral API in-process (``start``, ``send``, ``cancel``,
``follow``), on a real manager, store and skill processes, with the in-process scripted model
(``FunctionProvider``): the fast loop tests beside the real-socket ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.agent import (
    AgentService,
    ApprovalPending,
    ApprovalWait,
    FunctionProvider,
    ModelReply,
    RunDone,
    RunEvent,
    Said,
    TextDelta,
    ToolCall,
    ToolEnded,
    ToolOutput,
    ToolResult,
    ToolStarted,
    Turn,
    UserText,
)
from ongrid_skills.agent.function_model import ModelCall, scripted
from ongrid_skills.errors import Conflict, Forbidden
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.types import Role
from tests.support.agent import OLGA, OSCAR
from tests.support.server import make_settings
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import until

NOISY = "#!/bin/sh\ncat >/dev/null\necho 'scanning /var' >&2\necho '{\"used_pct\": 91}'\n"
VERA = Principal("vera", Role.VIEWER)


def turn(text: str = "", *calls: tuple[str, str]) -> Turn:
    return Turn(text, [ToolCall(f"call_{i}", name, args) for i, (name, args) in enumerate(calls)])


def settings_of(tmp_path: Path, skills_root: Path) -> Settings:
    return make_settings(tmp_path, skills_root, llm_model="scripted")


@asynccontextmanager
async def service_of(
    settings: Settings, answer: Callable[[ModelCall], Turn | Awaitable[Turn]]
) -> AsyncIterator[tuple[Manager, AgentService]]:
    async with open_manager(settings, loader_sink=lambda _line: None) as manager:
        factory = FunctionProvider.factory(answer)
        service = AgentService(manager, provider_factory=factory, poll_seconds=0.05)
        try:
            yield manager, service
        finally:
            await service.close()


async def collect(service: AgentService, run_id: str, after: int = 0) -> list[Any]:
    return [pair async for pair in service.follow(run_id, after)]


def test_two_doors_following_one_run_get_the_same_typed_events_and_a_replay_too(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    make_skill("disk_usage", NOISY)
    answer = scripted(turn("Let me look.", ("disk_usage", "{}")), turn("/var is 91% full."))

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        async with service_of(settings_of(tmp_path, skills_root), answer) as (_m, service):
            run = service.start("default", OLGA, "how full is /var?")
            first, second = await asyncio.gather(collect(service, run.id), collect(service, run.id))
            await service.finished(run.id)
            return first, second, await collect(service, run.id)

    first, second, replay = asyncio.run(main())
    assert first == second == replay
    assert [seq for seq, _ in first] == list(range(1, len(first) + 1))
    events: list[RunEvent] = [event for _, event in first]
    kinds = [type(e) for e in events]
    assert kinds[0] is Said and kinds[-1] is RunDone
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == "Let me look./var is 91% full."
    assert deltas[:3] == ["Let ", "me ", "look."]  # streamed word by word
    said = [e for e in events if isinstance(e, Said) and e.role == "assistant"]
    assert [s.text for s in said] == ["Let me look.", "/var is 91% full."]
    assert said[0].tool_calls == (ToolCall("call_0", "disk_usage", "{}"),)
    # Each text delta of a turn comes before the whole message of that turn.
    assert events.index(said[0]) > max(
        i for i, e in enumerate(events) if isinstance(e, TextDelta) and e.text == "look."
    )
    (started,) = [e for e in events if isinstance(e, ToolStarted)]
    assert started.tool == "disk_usage" and started.args == {}
    (output,) = [e for e in events if isinstance(e, ToolOutput)]
    assert output.kind == "stderr" and output.data["line"] == "scanning /var"
    (ended,) = [e for e in events if isinstance(e, ToolEnded)]
    assert ended.status == "succeeded" and ended.content == '{"used_pct": 91}\n'.strip()
    done = events[-1]
    assert isinstance(done, RunDone)
    assert done.status == "done" and done.final_answer == "/var is 91% full." and done.turns == 2


def test_a_follower_that_starts_late_gets_the_stretch_from_where_it_asks(
    tmp_path: Path, skills_root: Path
) -> None:
    answer = scripted(turn("Hello there."), turn("Second answer."))

    async def main() -> tuple[list[Any], list[Any]]:
        async with service_of(settings_of(tmp_path, skills_root), answer) as (_m, service):
            run = service.start("default", OLGA, "hi")
            whole = await collect(service, run.id)
            after = whole[-1][0]
            service.send(run.id, "again", OLGA)
            return whole, await collect(service, run.id, after)

    whole, more = asyncio.run(main())
    assert more[0][0] == whole[-1][0] + 1
    assert more[0][1] == Said("user", "again")
    assert isinstance(more[-1][1], RunDone) and more[-1][1].final_answer == "Second answer."


def test_cancel_through_the_service_checks_the_gate_and_ends_a_thinking_run(
    tmp_path: Path, skills_root: Path
) -> None:
    thinking = asyncio.Event()

    async def never(_call: ModelCall) -> Turn:
        thinking.set()
        await asyncio.Event().wait()  # a model that never answers
        raise AssertionError("unreachable")

    async def main() -> tuple[str, list[Any]]:
        async with service_of(settings_of(tmp_path, skills_root), never) as (_m, service):
            run = service.start("default", OLGA, "think hard")
            await asyncio.wait_for(thinking.wait(), 10)
            with pytest.raises(Forbidden):
                await service.cancel(run.id, VERA)  # a viewer, not the requester
            record = await service.cancel(run.id, OSCAR)  # an operator may
            with pytest.raises(Conflict):
                await service.cancel(run.id, OLGA)  # over
            return record.status.value, await collect(service, run.id)

    status, events = asyncio.run(main())
    assert status == "cancelled"
    done = events[-1][1]
    assert isinstance(done, RunDone) and done.status == "cancelled"
    assert done.error == {"code": "cancelled", "message": "the run was cancelled"}


def test_cancelling_a_waiting_run_through_the_service_withdraws_its_request(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    make_skill("set_flag", **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    answer = scripted(turn("", ("set_flag", '{"flag": "on"}')))

    async def main() -> tuple[str, list[str], list[Any]]:
        async with service_of(settings_of(tmp_path, skills_root), answer) as (manager, service):
            run = service.start("fixer", OLGA, "turn it on")
            await until(lambda: service.get(run.id).status == "waiting_approval", "a pause")
            record = await service.cancel(run.id, OLGA)
            approvals = [a.status for a in manager.store.approvals.with_status("cancelled")]
            return record.status.value, approvals, await collect(service, run.id)

    status, approvals, events = asyncio.run(main())
    assert status == "cancelled" and approvals == ["cancelled"]
    assert any(isinstance(e, ApprovalPending) for _, e in events)


def test_only_the_requester_continues_a_run_and_only_once_it_has_ended(
    tmp_path: Path, skills_root: Path
) -> None:
    release = asyncio.Event()

    async def slow(call: ModelCall) -> Turn:
        await release.wait()
        return turn(f"answer {call.index}")

    async def main() -> list[str]:
        async with service_of(settings_of(tmp_path, skills_root), slow) as (_m, service):
            run = service.start("default", OLGA, "first")
            with pytest.raises(Conflict):
                service.send(run.id, "too early", OLGA)
            release.set()
            await service.finished(run.id)
            with pytest.raises(Forbidden):
                service.send(run.id, "not yours", OSCAR)
            service.send(run.id, "second", OLGA)
            await service.finished(run.id)
            return [str(m["role"]) for m in service.body(run.id)["messages"]]

    assert asyncio.run(main()) == ["user", "assistant", "user", "assistant"]


def test_a_runs_transcript_round_trips_through_the_store_as_typed_parts(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    make_skill("disk_usage", NOISY)
    make_skill("set_flag", **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    answer = scripted(
        turn("Looking.", ("disk_usage", "{ }")),
        turn("", ("set_flag", '{"flag": "on"}')),
        turn("Done, the flag was refused."),
    )

    async def main() -> tuple[list[Any], list[Any], list[Any], dict[str, Any]]:
        async with service_of(settings_of(tmp_path, skills_root), answer) as (manager, service):
            run = service.start("fixer", OLGA, "look and set")
            await until(lambda: run.pending, "the call to wait for approval")
            execution = manager.store.executions.get(next(iter(run.pending)))
            assert execution is not None and execution.approval_id is not None
            await manager.desk.reject(execution.approval_id, OSCAR, "freeze")
            await service.finished(run.id)
            stored = [m.part for m in service.runs.messages(run.id)]
            restored = service.restore(service.get(run.id)).messages
            return list(run.messages), stored, restored, service.body(run.id)

    live, stored, restored, body = asyncio.run(main())
    assert stored == live == restored
    kinds = [type(p) for p in stored]
    assert kinds == [
        UserText,
        ModelReply,
        ToolResult,
        ModelReply,
        ApprovalWait,
        ToolResult,
        ModelReply,
    ]
    reply = stored[1]
    assert isinstance(reply, ModelReply)
    assert reply.tool_calls == (ToolCall("call_0", "disk_usage", "{ }"),)  # verbatim
    refused = stored[5]
    assert isinstance(refused, ToolResult) and refused.is_error and refused.status == "rejected"
    # The REST and ``chat --json`` shape of the transcript is as it always was.
    messages = body["messages"]
    assert messages[3]["tool_calls"] == [
        {
            "id": "call_0",
            "name": "set_flag",
            "arguments": '{"flag": "on"}',
        }
    ]
    assert set(messages[4]) == {
        "seq",
        "role",
        "tool_call_id",
        "name",
        "execution_id",
        "approval_id",
        "ts",
    }
    assert set(messages[2]) == {
        "seq",
        "role",
        "tool_call_id",
        "name",
        "content",
        "status",
        "execution_id",
        "is_error",
        "ts",
    }
