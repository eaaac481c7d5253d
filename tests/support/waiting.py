"""Waiting with a deadline, never with a bare sleep.

A test first waits on an event the code under test sets (``threading.Event.wait(timeout)``,
``asyncio.wait_for(event.wait(), timeout)``, a ``threading.Condition``). Where the state lives
beyond the test's reach (a process table, a file a child writes, a row another process commits,
a REST resource), it polls it with the ONE helper here: :func:`wait_for` from synchronous code,
:func:`until` from a coroutine. Both re-run a check against a monotonic deadline, pausing a little
longer each time (from 1 ms up to 50 ms), and fail with what was awaited when the deadline passes.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

FIRST_PAUSE = 0.001
LONGEST_PAUSE = 0.05


def _pauses() -> Iterator[float]:
    pause = FIRST_PAUSE
    while True:
        yield pause
        pause = min(pause * 2, LONGEST_PAUSE)


def wait_for(check: Callable[[], T], what: str = "the condition", timeout: float = 15.0) -> T:
    """Call ``check`` until it returns something truthy and return that, or fail after
    ``timeout`` seconds saying it was waiting for ``what``."""
    deadline = time.monotonic() + timeout
    for pause in _pauses():
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            break
        time.sleep(pause)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


async def until(
    check: Callable[[], T | Awaitable[T]], what: str = "the condition", timeout: float = 15.0
) -> T:
    """:func:`wait_for` for coroutines: the event loop runs between checks, and ``check`` may
    itself be a coroutine function."""
    deadline = time.monotonic() + timeout
    for pause in _pauses():
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(pause)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
