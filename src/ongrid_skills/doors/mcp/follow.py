"""Following a call to its end, with its live timeline forwarded to the client that asked.

While a call runs, its timeline events reach the request's client: stderr lines as
``notifications/message`` (at the levels the connection accepts), progress as
``notifications/progress``. The request being cancelled (by the client, or its connection
closing) cancels the execution, which kills the skill's process group.

This module never starts a call and never ends one otherwise than by that cancellation; what a
call answers is :mod:`ongrid_skills.doors.mcp.results`.
"""

from __future__ import annotations

import contextlib

import anyio
import mcp_types as types

from ongrid_skills.doors.mcp.session import Ctx, log_levels
from ongrid_skills.errors import SkillError
from ongrid_skills.execution.records import Event, Execution
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager


async def follow(
    manager: Manager, ctx: Ctx | None, execution: Execution, principal: Principal
) -> None:
    """Follow the call to its end, forwarding its timeline to ``ctx``'s client; the request
    being cancelled (by the client, or its connection closing) cancels the call."""
    timeline = manager.hub.get(execution.id)
    if timeline is None:
        return
    levels = log_levels(ctx) if ctx is not None else frozenset()
    try:
        async for _seq, event in timeline.follow():
            if ctx is not None:
                await _forward(ctx, execution.skill, event, levels)
    except anyio.get_cancelled_exc_class():
        # Shielded: the cancellation that ends this request must not also cancel the cancel.
        with anyio.CancelScope(shield=True), contextlib.suppress(SkillError):
            await manager.cancel(execution.id, principal)
        raise


async def await_end(manager: Manager, ctx: Ctx, execution_id: str, skill: str) -> None:
    """Until the call is final: its live timeline when it runs in this process (forwarded),
    else the store (waiting for a signature, or run by another process on the data dir).
    Never cancels the call: the caller only stops waiting."""
    levels = log_levels(ctx)
    while not manager.get(execution_id).status.final:
        timeline = manager.hub.get(execution_id)
        if timeline is None:
            await anyio.sleep(0.2)
            continue
        async for _seq, event in timeline.follow():
            await _forward(ctx, skill, event, levels)


async def _forward(
    ctx: Ctx, skill: str, event: Event, levels: frozenset[types.LoggingLevel]
) -> None:
    """One timeline event to the client: stderr → log message, progress → progress. Best effort:
    a client gone away cancels the request anyway."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        await _send_event(ctx, skill, event, levels)


async def _send_event(
    ctx: Ctx, skill: str, event: Event, levels: frozenset[types.LoggingLevel]
) -> None:
    if event.type == "progress":
        data = event.data
        total = data.get("total")
        await ctx.session.report_progress(
            float(data["progress"]),
            float(total) if total is not None else None,
            data.get("message"),
        )
        return
    if event.type == "stderr":
        level: types.LoggingLevel = "info"
        text = str(event.data.get("line", ""))
    elif event.type == "stderr_truncated":
        level = "warning"
        text = "[stderr truncated: over 1 MiB, the rest is not forwarded]"
    else:
        return
    if level not in levels:
        return
    notification = types.LoggingMessageNotification(
        params=types.LoggingMessageNotificationParams(level=level, logger=skill, data=text)
    )
    await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
