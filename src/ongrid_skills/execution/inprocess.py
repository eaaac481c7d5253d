"""Running a built-in skill in-process with the same contract as a subprocess call.

Same timeout, same timeline (``stderr`` and ``progress`` events, a 4 KiB ``stderr_tail``), same
result shape (the JSON text of the returned value is the verbatim result). Sync functions run in
a worker thread so they never block the event loop; a sync function that overruns its timeout
is abandoned (its thread cannot be killed) and the call is ``timed_out`` all the same.

Events a function emits from another thread (a sync built-in always does) are handed to the
event loop's thread in order (``call_soon_threadsafe``): the timeline, its waiters and the store
flush timer are loop-only objects. Once the call has ended, late events of an abandoned thread
are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Reach, ToolPorts
from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Status
from ongrid_skills.execution.runner import RunOutcome
from ongrid_skills.execution.stderr import TAIL_BYTES
from ongrid_skills.governance.gate import persona_permits
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry

LOG = logging.getLogger("ongrid_skills.builtins")


def _any_skill(_skill: Skill) -> bool:
    return True


async def run_builtin(
    skill: Skill,
    args: dict[str, Any],
    emit: EventSink,
    *,
    registry: Registry | None = None,
    persona: Persona | None = None,
    config: Mapping[str, str] | None = None,
    reach: Reach | None = None,
    ports: ToolPorts | None = None,
    caller: str | None = None,
) -> RunOutcome:
    """Call ``skill.builtin`` with ``args`` and return the outcome a child process would give;
    ``reach`` (default: the strict defaults) bounds what it may read and connect to; ``ports``
    is what the manager lends built-ins, ``caller`` who asked for the call."""
    tail: list[str] = []
    tail_size = 0
    ended = False
    lock = threading.Lock()  # tail and ``ended``: a worker thread may emit while the call ends
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def deliver(event: Event) -> None:
        if not ended:
            emit(event)

    def sink(kind: str, data: dict[str, Any]) -> None:
        nonlocal tail_size
        with lock:
            if ended:
                return
            if kind == "stderr":
                line = str(data.get("line", ""))
                tail.append(line)
                tail_size += len(line) + 1
                while tail_size > TAIL_BYTES and len(tail) > 1:
                    tail_size -= len(tail.pop(0)) + 1
        event = Event(kind, data)
        if threading.get_ident() == loop_thread:
            deliver(event)
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: the call is long over
            loop.call_soon_threadsafe(deliver, event)

    ctx = BuiltinContext(
        config=config if config is not None else (registry.config if registry else {}),
        emit=sink,
        registry=registry,
        persona=persona,
        permits=(lambda s: persona_permits(persona, s)) if persona is not None else _any_skill,
        reach=reach if reach is not None else Reach(),
        ports=ports if ports is not None else ToolPorts(),
        caller=caller,
    )
    started_wall = time.time()
    started = time.monotonic()
    fn = skill.builtin

    def done(status: Status, **kw: Any) -> RunOutcome:
        nonlocal ended
        with lock:
            ended = True
            text = "\n".join(tail) + ("\n" if tail else "")
        return RunOutcome(
            status,
            stderr_tail=text[-TAIL_BYTES:],
            started_at=started_wall,
            duration_ms=round((time.monotonic() - started) * 1000, 3),
            **kw,
        )

    deadline = asyncio.timeout(skill.timeout_seconds)
    try:
        async with deadline:
            if inspect.iscoroutinefunction(fn):
                value = await fn(ctx, **args)
            else:
                value = await asyncio.to_thread(fn, ctx, **args)
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except TimeoutError as exc:
        if not deadline.expired():  # the function's own TimeoutError (a socket timeout…)
            LOG.exception("built-in %s failed", skill.name)
            return done(
                Status.FAILED, error=ErrorInfo("internal_error", f"{type(exc).__name__}: {exc}")
            )
        limit = skill.timeout_seconds
        return done(Status.TIMED_OUT, error=ErrorInfo("timed_out", f"timed out after {limit} s"))
    except BuiltinFailure as exc:
        return done(Status.FAILED, error=ErrorInfo(exc.code, str(exc)), exit_code=1)
    except Exception as exc:  # a bug in the built-in (or an unserialisable result)
        LOG.exception("built-in %s failed", skill.name)
        return done(
            Status.FAILED, error=ErrorInfo("internal_error", f"{type(exc).__name__}: {exc}")
        )
    return done(Status.SUCCEEDED, result=json.loads(text), result_text=text, exit_code=0)
