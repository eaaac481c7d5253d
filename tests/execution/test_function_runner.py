"""The manager's submit and approval logic, run in-process with a function-backed runner.

Real manager, real SQLite store in tmp_path, real skill folders loaded by the real loader; only
the child is replaced: every call goes to a Python function through :class:`FunctionRunner`.
Each skill's entry would leave a ``spawned`` file if it were ever executed, so every test also
shows that nothing was spawned. The same rules run against real processes in tests/server/.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ongrid_skills.errors import ApprovalRequired, Conflict
from ongrid_skills.execution.function_runner import FunctionRunner
from ongrid_skills.execution.pipeline import execute
from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status
from ongrid_skills.execution.runner import Runner, SpawnSpec, SubprocessRunner
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.runtime import load_registry, open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.types import Role
from tests.support.agent import make_settings
from tests.support.runner import canonical_dir, python_skill
from tests.support.skills import MakeSkill

T = TypeVar("T")

NEVER_SPAWNED = "#!/bin/sh\ntouch spawned\nexit 3\n"
SCHEMA = {
    "type": "object",
    "properties": {
        "target": {"type": "string"},
        "count": {"type": "integer"},
        "note": {"type": "string"},
    },
    "required": ["target"],
}
ARGS = {"target": "db-01", "count": 3, "note": 'frozen ✓ "quoted" \\ back'}
OLGA = Principal("olga", Role.OPERATOR)
ADMIN = Principal("admin", Role.ADMIN)
ADMIN2 = Principal("admin2", Role.ADMIN)
DEADLINE = 10.0


def folder_of(spec: SpawnSpec) -> str:
    return Path(spec.entry).parent.name


def echo(spec: SpawnSpec, args: Any) -> Any:
    """The function standing in for every skill: it hands back what it was given."""
    return {"skill": folder_of(spec), "args": args}


@pytest.fixture
def settings(tmp_path: Path, skills_root: Path, make_skill: MakeSkill) -> Settings:
    make_skill("read_thing", NEVER_SPAWNED, schema=SCHEMA)
    make_skill("set_flag", NEVER_SPAWNED, schema=SCHEMA, **{"class": "mutating"})
    make_skill("drop_table", NEVER_SPAWNED, schema=SCHEMA, **{"class": "dangerous"})
    make_skill("slow_thing", NEVER_SPAWNED, schema=SCHEMA, timeout_seconds=1)
    return make_settings(tmp_path, skills_root)


@pytest.fixture(autouse=True)
def nothing_spawned(skills_root: Path) -> Any:
    yield
    assert sorted(skills_root.glob("*/spawned")) == []


def with_manager(
    settings: Settings, runner: Runner, scenario: Callable[[Manager], Awaitable[T]]
) -> T:
    async def main() -> T:
        async with open_manager(settings, runner=runner, loader_sink=lambda _l: None) as manager:
            return await scenario(manager)

    return asyncio.run(main())


async def settled(manager: Manager, execution_id: str) -> Execution:
    """The execution once its call (if one was started) has ended."""
    task = manager.tasks.get(execution_id)
    if task is not None:
        await asyncio.wait_for(asyncio.shield(task), DEADLINE)
    return manager.get(execution_id)


def stored_events(manager: Manager, execution_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.data) for _seq, e in manager.store.executions.events(execution_id)]


def audit_actions(manager: Manager) -> list[str]:
    return [entry["action"] for entry in reversed(manager.store.audit.entries(limit=1000))]


# ---- the runner contract: the shape a real child gives ---------------------------------------
def test_a_function_and_a_real_child_give_the_same_outcome_for_the_same_call(
    tmp_path: Path,
) -> None:
    child = "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps({'got': args}))\n"
    crash = "import sys\nsys.stdin.read()\nraise RuntimeError('boom')\n"

    def same(_spec: SpawnSpec, args: Any) -> Any:
        return {"got": args}

    def raises(_spec: SpawnSpec, _args: Any) -> Any:
        raise RuntimeError("boom")

    real: Runner = SubprocessRunner(reap_orphans=False)
    seen: dict[str, tuple[Any, ...]] = {}
    for code, fn, where in ((child, same, "ok"), (crash, raises, "crash")):
        spec = python_skill(canonical_dir(tmp_path / where), code)
        outcomes = []
        for runner in (real, FunctionRunner(fn)):
            events: list[Event] = []
            outcome = asyncio.run(runner.run(spec, b'{"n": 1, "s": "x"}', events.append))
            last_line = [e.data["line"] for e in events if e.type == "stderr"][-1:]
            tail_end = outcome.stderr_tail.rstrip("\n").rsplit("\n", 1)[-1]
            fields = (outcome.status, outcome.error, outcome.exit_code, outcome.result)
            outcomes.append((*fields, outcome.result_text, last_line, tail_end))
        assert outcomes[0] == outcomes[1], where
        seen[where] = outcomes[0]

    got = {"got": {"n": 1, "s": "x"}}
    assert seen["ok"] == (Status.SUCCEEDED, None, 0, got, json.dumps(got), [], "")
    assert seen["crash"][:3] == (Status.FAILED, ErrorInfo("exit_status", "exit status 1"), 1)
    assert seen["crash"][-2:] == (["RuntimeError: boom"], "RuntimeError: boom")


# ---- safe and mutating calls -----------------------------------------------------------------
def test_a_safe_call_runs_the_function_once_and_records_the_result_verbatim(
    settings: Settings,
) -> None:
    runner = FunctionRunner(echo)

    async def scenario(manager: Manager) -> tuple[Execution, Execution, list[Any]]:
        done = await manager.submit("read_thing", ARGS, principal=OLGA)
        return done, manager.get(done.id), stored_events(manager, done.id)

    done, stored, events = with_manager(settings, runner, scenario)

    assert done.status is Status.SUCCEEDED
    assert done.result == {"skill": "read-thing", "args": ARGS}
    assert done.result_text == json.dumps(done.result, ensure_ascii=False)
    assert done.exit_code == 0
    assert stored.status is Status.SUCCEEDED and stored.result == done.result
    assert events == [
        ("status", {"status": "running", "skill": "read_thing"}),
        ("status", {"status": "succeeded"}),
    ]
    assert [args for _spec, args in runner.calls] == [ARGS]
    assert runner.calls[0][0].timeout_seconds == 30


def test_a_mutating_call_waits_unconfirmed_and_runs_once_when_confirmed(
    settings: Settings,
) -> None:
    runner = FunctionRunner(echo)

    async def scenario(manager: Manager) -> tuple[Execution, int, Execution]:
        pending = await manager.submit("set_flag", ARGS, principal=OLGA)
        calls_while_pending = len(runner.calls)
        confirmed = await manager.submit("set_flag", ARGS, principal=OLGA, confirm=True)
        return pending, calls_while_pending, confirmed

    pending, calls_while_pending, confirmed = with_manager(settings, runner, scenario)

    assert pending.status is Status.PENDING_APPROVAL and pending.approval_id
    assert calls_while_pending == 0
    assert confirmed.status is Status.SUCCEEDED
    assert confirmed.result == {"skill": "set-flag", "args": ARGS}
    assert [args for _spec, args in runner.calls] == [ARGS]


def test_an_agents_confirmation_does_not_count_and_nothing_runs(settings: Settings) -> None:
    runner = FunctionRunner(echo)
    agent = Principal("bot", Role.OPERATOR, human=False)

    async def scenario(manager: Manager) -> Execution:
        return await manager.submit("set_flag", ARGS, principal=agent, confirm=True)

    assert with_manager(settings, runner, scenario).status is Status.PENDING_APPROVAL
    assert runner.calls == []


# ---- dangerous calls: two signatures -----------------------------------------------------------
def test_a_dangerous_call_runs_exactly_once_with_the_frozen_args_after_two_signatures(
    settings: Settings,
) -> None:
    runner = FunctionRunner(echo)

    async def scenario(manager: Manager) -> tuple[str, int, Execution, type[Exception]]:
        pending = await manager.submit("drop_table", ARGS, principal=OLGA)
        assert pending.approval_id is not None
        first = await manager.desk.approve(pending.approval_id, ADMIN)
        calls_after_one = len(runner.calls)
        await manager.desk.approve(pending.approval_id, ADMIN2)
        final = await settled(manager, pending.id)
        try:
            await manager.desk.approve(pending.approval_id, Principal("third", Role.ADMIN))
        except Conflict as exc:
            late: type[Exception] = type(exc)
        return first.status, calls_after_one, final, late

    first_status, calls_after_one, final, late = with_manager(settings, runner, scenario)

    assert first_status == "pending"
    assert calls_after_one == 0
    assert final.status is Status.SUCCEEDED
    assert final.result == {"skill": "drop-table", "args": ARGS}
    assert len(runner.calls) == 1
    spec, args = runner.calls[0]
    assert args == ARGS
    assert json.dumps(args, ensure_ascii=False) == json.dumps(ARGS, ensure_ascii=False)
    assert folder_of(spec) == "drop-table"
    assert late is Conflict  # the request is closed: a third signature starts nothing


def test_a_rejected_dangerous_call_never_reaches_the_function(settings: Settings) -> None:
    runner = FunctionRunner(echo)

    async def scenario(manager: Manager) -> tuple[Execution, list[str]]:
        pending = await manager.submit("drop_table", ARGS, principal=OLGA)
        assert pending.approval_id is not None
        await manager.desk.approve(pending.approval_id, ADMIN)
        await manager.desk.reject(pending.approval_id, ADMIN2, "not today")
        return await settled(manager, pending.id), audit_actions(manager)

    final, actions = with_manager(settings, runner, scenario)

    assert final.status is Status.REJECTED
    assert final.error is not None and final.error.message == "not today"
    assert runner.calls == []
    assert "approval.rejected" in actions and "execution.started" not in actions


# ---- cancellation ------------------------------------------------------------------------------
def test_cancelling_a_running_call_cancels_the_function_and_ends_cancelled(
    settings: Settings,
) -> None:
    entered = asyncio.Event()
    seen: list[str] = []

    async def blocks(_spec: SpawnSpec, _args: Any) -> Any:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    runner = FunctionRunner(blocks)

    async def scenario(manager: Manager) -> tuple[Execution, list[Any]]:
        running = await manager.submit("read_thing", ARGS, principal=OLGA, wait=False)
        await asyncio.wait_for(entered.wait(), DEADLINE)
        cancelled = await manager.cancel(running.id, OLGA)
        return cancelled, stored_events(manager, running.id)

    cancelled, events = with_manager(settings, runner, scenario)

    assert cancelled.status is Status.CANCELLED
    assert cancelled.error is not None and cancelled.error.code == "cancelled"
    assert seen == ["cancelled"]
    assert events[-1] == ("status", {"status": "cancelled"})
    assert len(runner.calls) == 1


def test_cancelling_a_pending_request_means_the_function_is_never_called(
    settings: Settings,
) -> None:
    runner = FunctionRunner(echo)

    async def scenario(manager: Manager) -> Execution:
        pending = await manager.submit("set_flag", ARGS, principal=OLGA)
        return await manager.cancel(pending.id, OLGA)

    cancelled = with_manager(settings, runner, scenario)

    assert cancelled.status is Status.CANCELLED
    assert runner.calls == []


# ---- failures ----------------------------------------------------------------------------------
def test_a_failing_function_fails_the_call_with_the_error_envelope_of_a_crashed_child(
    settings: Settings,
) -> None:
    def fails(_spec: SpawnSpec, _args: Any) -> Any:
        raise RuntimeError("disk is full")

    async def scenario(manager: Manager) -> tuple[Execution, list[Any]]:
        done = await manager.submit("read_thing", ARGS, principal=OLGA)
        return manager.get(done.id), stored_events(manager, done.id)

    failed, events = with_manager(settings, FunctionRunner(fails), scenario)

    assert failed.status is Status.FAILED
    assert failed.exit_code == 1
    assert failed.result is None and failed.result_text is None
    assert failed.stderr_tail.startswith("Traceback (most recent call last):")
    assert failed.stderr_tail.endswith("RuntimeError: disk is full\n")
    assert json.loads(failed.envelope()) == {
        "error": {"code": "exit_status", "message": "exit status 1"},
        "exit_code": 1,
        "stderr_tail": failed.stderr_tail,
    }
    lines = [data["line"] for kind, data in events if kind == "stderr"]
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "RuntimeError: disk is full"
    assert events[0] == ("status", {"status": "running", "skill": "read_thing"})
    assert events[-1] == ("status", {"status": "failed"})


def test_a_function_that_outlives_the_skill_timeout_is_timed_out(settings: Settings) -> None:
    async def hangs(_spec: SpawnSpec, _args: Any) -> Any:
        await asyncio.Event().wait()

    async def scenario(manager: Manager) -> Execution:
        return await manager.submit("slow_thing", ARGS, principal=OLGA)

    done = with_manager(settings, FunctionRunner(hangs), scenario)

    assert done.status is Status.TIMED_OUT
    assert done.error is not None
    assert (done.error.code, done.error.message) == ("timed_out", "timed out after 1 s")


@pytest.mark.parametrize(
    ("written", "code"),
    [(b"", "empty_output"), (b"{not json", "invalid_output"), (float("nan"), "invalid_output")],
)
def test_output_a_child_could_not_hand_back_fails_the_same_way(
    settings: Settings, written: Any, code: str
) -> None:
    async def scenario(manager: Manager) -> Execution:
        return await manager.submit("read_thing", ARGS, principal=OLGA)

    done = with_manager(settings, FunctionRunner(lambda _s, _a: written), scenario)

    assert done.status is Status.FAILED
    assert done.error is not None and done.error.code == code
    assert done.exit_code == 0


def test_bytes_returned_are_the_verbatim_stdout_trimmed() -> None:
    runner = FunctionRunner(lambda _s, _a: b'\n  {"b": 1,   "a": 2}  \n')
    spec = SpawnSpec(entry="/x/run", root="/x", cwd="/x", env={}, timeout_seconds=5)
    events: list[Event] = []

    outcome = asyncio.run(runner.run(spec, b'{"k": [1]}', events.append))

    assert outcome.status is Status.SUCCEEDED
    assert outcome.result_text == '{"b": 1,   "a": 2}'
    assert outcome.result == {"b": 1, "a": 2}
    assert runner.calls == [(spec, {"k": [1]})]
    assert events == []
    assert outcome.started_at is not None and outcome.duration_ms >= 0


# ---- the Python API path ---------------------------------------------------------------------
def test_execute_runs_through_the_function_runner_and_still_gates_first(
    settings: Settings,
) -> None:
    registry = load_registry(settings=settings, log=lambda _l: None)
    runner = FunctionRunner(echo)

    done = asyncio.run(execute(registry, "read_thing", ARGS, runner=runner))
    with pytest.raises(ApprovalRequired):
        asyncio.run(execute(registry, "set_flag", ARGS, runner=runner))

    assert done.status is Status.SUCCEEDED
    assert done.result == {"skill": "read-thing", "args": ARGS}
    assert [args for _spec, args in runner.calls] == [ARGS]
