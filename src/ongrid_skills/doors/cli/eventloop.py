"""The event loop the commands run on: uvloop where it is installed, else asyncio's own.

Every command that runs an event loop (``serve``, ``mcp``, ``worker``, ``chat``, ``run``) runs
it through :func:`run_until_done` (``serve`` through uvicorn, whose ``loop`` setting is
:func:`chosen`), so they all run on the same loop. ``serve`` has run on uvloop since it was
written; the others ran on asyncio's loop until the runner was measured on both. uvloop spends
less of the manager's CPU per event: 30-40 µs less per serial skill call in the runner bench
(about 250 µs instead of 285 µs of the parent's CPU; ``bench/README.md``), on a 2-core machine
where the child waits for that CPU.

``ONGRID_EVENT_LOOP=asyncio`` selects asyncio's loop instead (to rule the loop out while
debugging, or where a third-party library misbehaves on uvloop); ``uvloop`` or ``auto`` (the
default) selects uvloop when it can be imported. Any other value, or ``uvloop`` where it is not
installed, stops the command with a message before a loop starts. The Python API
(``ongrid_skills.execute``) runs on whatever loop its caller runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

import click

T = TypeVar("T")

ENV_NAME = "ONGRID_EVENT_LOOP"
Choice = Literal["uvloop", "asyncio"]


class EventLoopSettingError(click.ClickException):
    """``ONGRID_EVENT_LOOP`` names a loop that cannot be had."""


def chosen() -> Choice:
    """The loop the commands run on: the setting's, or uvloop when it can be imported."""
    wanted = os.environ.get(ENV_NAME, "").strip().lower() or "auto"
    if wanted == "asyncio":
        return "asyncio"
    if wanted not in ("auto", "uvloop"):
        raise EventLoopSettingError(
            f"{ENV_NAME}={wanted!r} is not a known event loop (auto, uvloop or asyncio)"
        )
    try:
        import uvloop  # noqa: F401, PLC0415 - only when a loop is about to run
    except ImportError:
        if wanted == "uvloop":
            raise EventLoopSettingError(f"{ENV_NAME}=uvloop but uvloop is not installed") from None
        return "asyncio"
    return "uvloop"


def run_until_done(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on a new loop of the chosen kind and return its result (``asyncio.run``'s
    contract: the loop is closed at the end, and its async generators and executor shut down)."""
    try:
        choice = chosen()
    except EventLoopSettingError:
        main.close()  # never started: no "coroutine was never awaited" warning on top
        raise
    if choice == "uvloop":
        import uvloop  # noqa: PLC0415

        return uvloop.run(main)
    return asyncio.run(main)


__all__ = ["ENV_NAME", "EventLoopSettingError", "chosen", "run_until_done"]
