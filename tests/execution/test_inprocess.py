"""In-process built-ins: same timeline, statuses and result shape as a subprocess call."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import InvalidArgs, Status
from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.execution.inprocess import run_builtin
from ongrid_skills.execution.records import Event, Execution
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry
from ongrid_skills.skills.schemas import signature_schema


def registry_of(*fns: Callable[..., Any], timeout: int = 30) -> Registry:
    return Registry(
        {
            fn.__name__: Skill(
                name=fn.__name__,
                description=f"{fn.__name__} test built-in",
                builtin=fn,
                schema=signature_schema(fn),
                kind="native",
                timeout_seconds=timeout,
            )
            for fn in fns
        }
    )


def call(
    registry: Registry, name: str, args: dict[str, Any] | None = None
) -> tuple[Execution, list[Event]]:
    events: list[Event] = []
    done = asyncio.run(ongrid_skills.execute(registry, name, args or {}, on_event=events.append))
    return done, events


def timeline(events: list[Event]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for event in events:
        if event.type == "stderr":
            out.append(("stderr", event.data["line"]))
        elif event.type == "progress":
            out.append(("progress", event.data))
        else:
            out.append((event.type, event.data.get("status")))
    return out


# ---- events and results ----------------------------------------------------------------------
def chatty(ctx: BuiltinContext, n: int = 2) -> dict[str, Any]:
    for i in range(1, n + 1):
        ctx.progress(i, n, f"step {i}")
        ctx.log(f"line {i}")
    return {"done": n}


async def chatty_async(ctx: BuiltinContext, n: int = 2) -> dict[str, Any]:
    for i in range(1, n + 1):
        ctx.progress(i, n, f"step {i}")
        await asyncio.sleep(0)
        ctx.log(f"line {i}")
    return {"done": n}


@pytest.mark.parametrize("fn", [chatty, chatty_async])
def test_progress_and_log_lines_become_timeline_events_in_order(
    fn: Callable[..., Any],
) -> None:
    done, events = call(registry_of(fn), fn.__name__, {"n": 2})
    assert done.status is Status.SUCCEEDED, done.error
    assert timeline(events) == [
        ("status", "running"),
        ("progress", {"progress": 1, "total": 2, "message": "step 1"}),
        ("stderr", "line 1"),
        ("progress", {"progress": 2, "total": 2, "message": "step 2"}),
        ("stderr", "line 2"),
        ("status", "succeeded"),
    ]
    assert done.stderr_tail == "line 1\nline 2\n"
    assert done.result == {"done": 2}
    assert done.exit_code == 0
    assert done.error is None


def test_progress_without_total_or_message_carries_only_the_progress() -> None:
    def bare(ctx: BuiltinContext) -> int:
        ctx.progress(0.5)
        return 1

    _, events = call(registry_of(bare), "bare")
    assert [e.data for e in events if e.type == "progress"] == [{"progress": 0.5}]


def test_the_stderr_tail_keeps_only_the_last_4_kib() -> None:
    def loud(ctx: BuiltinContext) -> None:
        for i in range(200):
            ctx.log(f"{i:04d} " + "x" * 95)

    done, events = call(registry_of(loud), "loud")
    assert len([e for e in events if e.type == "stderr"]) == 200
    assert len(done.stderr_tail.encode()) <= 4096
    assert done.stderr_tail.endswith("0199 " + "x" * 95 + "\n")
    assert done.stderr_tail.startswith(done.stderr_tail.splitlines()[0])
    assert "0000 " not in done.stderr_tail


def test_the_result_text_is_the_json_of_the_returned_value() -> None:
    def value(ctx: BuiltinContext) -> dict[str, Any]:
        return {"b": [1, 2.5, None, True], "a": "ünïcode", "nested": {"k": "v"}}

    done, _ = call(registry_of(value), "value")
    assert done.status is Status.SUCCEEDED
    assert done.result == {"b": [1, 2.5, None, True], "a": "ünïcode", "nested": {"k": "v"}}
    assert done.result_text == ('{"b": [1, 2.5, null, true], "a": "ünïcode", "nested": {"k": "v"}}')
    assert json.loads(done.result_text) == done.result


@pytest.mark.parametrize("returned", [[1, "two"], "text", 3, None])
def test_any_json_value_may_be_returned(returned: Any) -> None:
    def plain(ctx: BuiltinContext) -> Any:
        return returned

    done, _ = call(registry_of(plain), "plain")
    assert done.status is Status.SUCCEEDED
    assert done.result == returned
    assert done.result_text == json.dumps(returned)


def test_args_are_validated_against_the_signature_schema_before_running() -> None:
    ran: list[int] = []

    def typed(ctx: BuiltinContext, count: int) -> int:
        ran.append(count)
        return count

    registry = registry_of(typed)
    with pytest.raises(InvalidArgs) as info:
        call(registry, "typed", {"count": "three"})
    assert [v.pointer for v in info.value.violations] == ["/count"]
    with pytest.raises(InvalidArgs):
        call(registry, "typed", {"count": 1, "extra": True})
    assert ran == []
    done, _ = call(registry, "typed", {"count": 3})
    assert done.result == 3


# ---- threads ---------------------------------------------------------------------------------
def test_a_sync_builtin_runs_in_a_worker_thread_and_its_events_reach_the_loop_thread() -> None:
    def where(ctx: BuiltinContext) -> dict[str, int]:
        ctx.log("from the worker")
        ctx.progress(1, 1)
        return {"thread": threading.get_ident()}

    async def main() -> tuple[int, Execution, list[int]]:
        loop_thread = threading.get_ident()
        seen: list[int] = []
        done = await ongrid_skills.execute(
            registry_of(where), "where", {}, on_event=lambda _e: seen.append(threading.get_ident())
        )
        return loop_thread, done, seen

    loop_thread, done, seen = asyncio.run(main())
    assert done.status is Status.SUCCEEDED
    assert done.result["thread"] != loop_thread
    assert len(seen) == 4  # running, stderr, progress, succeeded
    assert set(seen) == {loop_thread}


def test_an_async_builtin_runs_on_the_event_loop_thread() -> None:
    async def here(ctx: BuiltinContext) -> dict[str, int]:
        return {"thread": threading.get_ident()}

    async def main() -> tuple[int, Execution]:
        return threading.get_ident(), await ongrid_skills.execute(registry_of(here), "here", {})

    loop_thread, done = asyncio.run(main())
    assert done.result["thread"] == loop_thread


def test_a_blocking_sync_builtin_does_not_block_the_event_loop() -> None:
    started = threading.Event()
    go = threading.Event()

    def blocking(ctx: BuiltinContext) -> bool:
        started.set()
        return go.wait(10)

    async def release() -> None:
        # Resumes only if the loop is free while the builtin blocks in its thread.
        assert await asyncio.to_thread(started.wait, 10)
        go.set()

    async def main() -> Execution:
        helper = asyncio.create_task(release())  # can only run if the loop is free
        done = await ongrid_skills.execute(registry_of(blocking), "blocking", {})
        await helper
        return done

    done = asyncio.run(main())
    assert done.status is Status.SUCCEEDED
    assert done.result is True


# ---- failures --------------------------------------------------------------------------------
def test_an_async_builtin_past_its_timeout_is_timed_out() -> None:
    async def sleepy(ctx: BuiltinContext) -> None:
        ctx.log("before the nap")
        await asyncio.sleep(30)

    done, events = call(registry_of(sleepy, timeout=1), "sleepy")
    assert done.status is Status.TIMED_OUT
    assert done.error is not None
    assert (done.error.code, done.error.message) == ("timed_out", "timed out after 1 s")
    assert done.stderr_tail == "before the nap\n"
    assert done.result is None and done.result_text is None
    assert timeline(events)[-1] == ("status", "timed_out")


def test_a_sync_builtin_past_its_timeout_is_abandoned_and_its_late_events_dropped() -> None:
    release = threading.Event()
    finished = threading.Event()

    def stuck(ctx: BuiltinContext) -> str:
        ctx.log("started")
        release.wait(10)
        ctx.log("late line")
        ctx.progress(1)
        finished.set()
        return "late result"

    async def main() -> tuple[Execution, list[Event]]:
        events: list[Event] = []
        done = await ongrid_skills.execute(
            registry_of(stuck, timeout=1), "stuck", {}, on_event=events.append
        )
        release.set()
        assert await asyncio.to_thread(finished.wait, 10)
        for _ in range(5):
            await asyncio.sleep(0)  # let any event handed to the loop be delivered
        return done, events

    done, events = asyncio.run(main())
    assert done.status is Status.TIMED_OUT
    assert done.error is not None and done.error.code == "timed_out"
    assert done.stderr_tail == "started\n"
    assert timeline(events) == [
        ("status", "running"),
        ("stderr", "started"),
        ("status", "timed_out"),
    ]


def test_builtin_failure_fails_the_call_with_builtin_failed() -> None:
    def picky(ctx: BuiltinContext, host: str) -> None:
        ctx.log(f"resolving {host}")
        raise BuiltinFailure(f"{host}: name does not resolve")

    done, events = call(registry_of(picky), "picky", {"host": "nowhere.invalid"})
    assert done.status is Status.FAILED
    assert done.error is not None
    assert done.error.code == "builtin_failed"
    assert done.error.message == "nowhere.invalid: name does not resolve"
    assert done.exit_code == 1
    assert done.stderr_tail == "resolving nowhere.invalid\n"
    assert timeline(events)[-1] == ("status", "failed")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_any_other_exception_is_an_internal_error(asynchronous: bool) -> None:
    def broken(ctx: BuiltinContext) -> None:
        raise RuntimeError("boom")

    async def broken_async(ctx: BuiltinContext) -> None:
        raise KeyError("missing")

    fn = broken_async if asynchronous else broken
    done, _ = call(registry_of(fn), fn.__name__)
    assert done.status is Status.FAILED
    assert done.error is not None
    assert done.error.code == "internal_error"
    expected = "KeyError: 'missing'" if asynchronous else "RuntimeError: boom"
    assert done.error.message == expected
    assert done.exit_code is None


def test_a_timeout_error_raised_by_the_builtin_itself_is_an_internal_error() -> None:
    def socket_timeout(ctx: BuiltinContext) -> None:
        raise TimeoutError("timed out reading from 10.0.0.1:9")

    done, _ = call(registry_of(socket_timeout), "socket_timeout")
    assert done.status is Status.FAILED
    assert done.error is not None
    assert done.error.code == "internal_error"
    assert done.error.message == "TimeoutError: timed out reading from 10.0.0.1:9"


@pytest.mark.parametrize(
    ("value", "kind"),
    [({"when": object()}, "TypeError"), ({1, 2}, "TypeError"), (float("nan"), "ValueError")],
)
def test_a_result_that_is_not_json_serialisable_is_an_internal_error(value: Any, kind: str) -> None:
    def odd(ctx: BuiltinContext) -> Any:
        return value

    done, _ = call(registry_of(odd), "odd")
    assert done.status is Status.FAILED
    assert done.error is not None
    assert done.error.code == "internal_error"
    assert done.error.message.startswith(f"{kind}: ")
    assert done.result is None and done.result_text is None


# ---- the context -----------------------------------------------------------------------------
def test_the_context_carries_config_registry_and_persona() -> None:
    seen: list[tuple[Any, Any]] = []

    def introspect(ctx: BuiltinContext) -> dict[str, Any]:
        seen.append((ctx.registry, ctx.persona))
        return dict(ctx.config)

    registry = registry_of(introspect)
    persona = registry.persona("default")
    events: list[Event] = []

    async def main() -> tuple[Any, Any]:
        skill = registry.get("introspect")
        from_registry = await run_builtin(skill, {}, events.append, registry=registry)
        given = await run_builtin(
            skill, {}, events.append, persona=persona, config={"prometheus.url": "http://x"}
        )
        return from_registry, given

    from_registry, given = asyncio.run(main())
    assert from_registry.status is Status.SUCCEEDED
    assert from_registry.result == {}
    assert given.result == {"prometheus.url": "http://x"}
    assert seen == [(registry, None), (None, persona)]
    assert events == []  # run_builtin emits only what the built-in emits
    assert given.duration_ms >= 0
    assert given.started_at is not None
