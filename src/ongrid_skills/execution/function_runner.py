"""A :class:`~ongrid_skills.execution.runner.Runner` backed by a Python callable, for tests.

The manager, the pipeline and the approval desk only ever see a ``Runner``, so their logic
(submit, confirmation, signatures, cancellation, the audit) can be exercised in-process: every
call of a skill with a target goes to ``fn(spec, args)`` instead of a child. The outcome has the
shape a child would give:

- ``args`` are the payload decoded back from JSON: exactly what a child would read on stdin (the
  frozen args of an approval, after the JSON trip);
- the return value is written as the child's stdout (``bytes`` verbatim, anything else as JSON)
  and goes through the same cap and decoding (:mod:`ongrid_skills.execution.wire`), so the
  result text is verbatim and invalid output fails as it would for a child;
- an exception is a child that died of it: its traceback goes through the stderr timeline
  (:mod:`ongrid_skills.execution.stderr`: ``stderr`` events and the 4 KiB tail), and the call
  fails with ``exit status 1``, as an uncaught exception ends a Python child;
- an async ``fn`` is awaited under the skill's timeout (``timed_out`` when it passes) and is
  cancelled with the awaiting task, as the subprocess runner's child is killed.

It must never spawn a process or run a real skill: it is a test double of the child, not a way
to run skills in-process (built-ins have :mod:`ongrid_skills.execution.inprocess`). A sync
``fn`` runs on the event loop, so it should return at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
import traceback
from collections.abc import Callable
from typing import Any

from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Status
from ongrid_skills.execution.runner import RunOutcome, SpawnSpec
from ongrid_skills.execution.stderr import StderrTimeline
from ongrid_skills.execution.wire import StdoutBuffer, decode_result

#: ``fn(spec, args)``: the result (or an awaitable of it), or raise to fail the call.
SkillFunction = Callable[[SpawnSpec, Any], Any]


class FunctionRunner:
    """Runs every call as ``fn(spec, args)``; ``calls`` lists each (spec, args) it was given."""

    def __init__(self, fn: SkillFunction) -> None:
        self.fn = fn
        self.calls: list[tuple[SpawnSpec, Any]] = []

    async def run(
        self, spec: SpawnSpec, payload: bytes, on_event: EventSink | None = None
    ) -> RunOutcome:
        """Call ``fn`` with the decoded payload and return the outcome a child would have had."""

        def emit(event: Event) -> None:
            if on_event is not None:
                with contextlib.suppress(Exception):
                    on_event(event)

        args = json.loads(payload)
        self.calls.append((spec, args))
        started_wall = time.time()
        started = time.monotonic()
        stderr = StderrTimeline(emit)
        deadline = asyncio.timeout(spec.timeout_seconds)
        try:
            async with deadline:
                value = self.fn(spec, args)
                if inspect.isawaitable(value):
                    value = await value
            stdout = (
                value
                if isinstance(value, bytes)
                else json.dumps(value, ensure_ascii=False).encode()
            )
        except TimeoutError as exc:
            if not deadline.expired():  # the function's own TimeoutError: it failed
                outcome = _died_of(exc, stderr)
            else:
                error = ErrorInfo("timed_out", f"timed out after {spec.timeout_seconds:g} s")
                outcome = RunOutcome(Status.TIMED_OUT, error=error)
        except Exception as exc:
            outcome = _died_of(exc, stderr)
        else:
            outcome = _exited_cleanly(stdout)
        stderr.close()
        outcome.stderr_tail = stderr.tail()
        outcome.started_at = started_wall
        outcome.duration_ms = round((time.monotonic() - started) * 1000, 3)
        return outcome


def _died_of(exc: BaseException, stderr: StderrTimeline) -> RunOutcome:
    """The outcome of a child that printed this traceback and exited 1."""
    stderr.feed("".join(traceback.format_exception(exc)).encode("utf-8", "replace"))
    error = ErrorInfo("exit_status", "exit status 1")
    return RunOutcome(Status.FAILED, error=error, exit_code=1)


def _exited_cleanly(stdout: bytes) -> RunOutcome:
    """The outcome of a child that wrote ``stdout`` and exited 0."""
    buffer = StdoutBuffer()
    if not buffer.take(stdout):
        return RunOutcome(Status.OUTPUT_TOO_LARGE, error=buffer.overflow())
    decoded = decode_result(stdout)
    if decoded.error is not None:
        return RunOutcome(Status.FAILED, stdout=stdout, error=decoded.error, exit_code=0)
    return RunOutcome(
        Status.SUCCEEDED,
        stdout=stdout,
        result=decoded.value,
        result_text=decoded.text,
        exit_code=0,
    )


__all__ = ["FunctionRunner", "SkillFunction"]
