"""Following a call's timeline from any process: its live timeline here, else the store.

A call runs in one process, and its live timeline is in that process's event hub; its events
reach the store in batches (``ONGRID_EVENT_FLUSH_MS`` after the first of each batch, and all of
them with the outcome). A client of another process sees the same numbered events: the stored
ones first, then the rest until the call's row is final.

How it learns of the rest: on PostgreSQL (replicas), from the replica's :class:`.Notices` — the
running replica forwards the live events while someone follows from elsewhere, and every commit
of the call's events or row wakes its followers, who read the store then. Without notices (SQLite:
a server beside a CLI on the same data dir), or while the listener is down, the store is read
again every :data:`POLL_SECONDS`. The store stays the record: a live event is yielded only when
it is the next one expected; a gap (a notice lost or too large) is read from the store.

Why the order of the reads: the row is read before the events, and the outcome is written in the
same transaction as the last events; so when the row read is final, the events read after it
are all of them. A call that starts running here meanwhile (an approval signed on this replica)
is followed on from its live timeline, whose numbering is the store's.

This module never writes the store, and never opens a timeline in the hub.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ongrid_skills.execution.records import Event, Status
from ongrid_skills.execution.timeline import EventHub
from ongrid_skills.fleet.notices import Notices
from ongrid_skills.store.executions import ExecutionRepo

POLL_SECONDS = 0.1
#: While the listener is up, the store is read at least this often anyway (a safety net only:
#: every commit of the call's events wakes the follower).
QUIET_SECONDS = 5.0


async def follow(
    hub: EventHub,
    executions: ExecutionRepo,
    execution_id: str,
    after: int = 0,
    poll: float = POLL_SECONDS,
    notices: Notices | None = None,
) -> AsyncIterator[tuple[int, Event]]:
    """The call's events after number ``after``, in order, until it has ended."""
    if notices is None:
        async for item in _polled(hub, executions, execution_id, after, poll):
            yield item
        return
    position = after
    asked = 0  # the listener's connection this follower last asked on
    forwarded = False  # whether a live event came (someone forwards this call)
    again = False  # ask again: the call runs now, and nobody forwards it yet
    with notices.subscribe(execution_id) as told:
        while True:
            if told.stored or not notices.connected or asked != notices.generation:
                told.stored = False
                timeline = hub.get(execution_id)
                if timeline is not None:
                    async for seq, event in timeline.follow(position):
                        yield seq, event
                    return
                row = executions.get(execution_id)
                for seq, event in executions.events(execution_id, position):
                    position = seq
                    yield seq, event
                if row is None or row.status.final:
                    return
                # Asked while it waited (for an approval, a slot): its replica had nothing to
                # forward then. Asked again at each change of its row until live events come.
                again = not forwarded and row.status is Status.RUNNING
            if not notices.connected:
                await asyncio.sleep(poll)
                continue
            if asked != notices.generation or again:
                asked, again = notices.generation, False
                await notices.ask(execution_id, position)
            await told.wait(QUIET_SECONDS)
            forwarded = forwarded or bool(told.live)
            while told.live:
                seq, event = told.live.popleft()
                if seq <= position:
                    continue
                if seq != position + 1:  # a gap: the store has it (or will, on commit)
                    told.live.clear()
                    told.stored = True
                    break
                position = seq
                yield seq, event


async def _polled(
    hub: EventHub, executions: ExecutionRepo, execution_id: str, after: int, poll: float
) -> AsyncIterator[tuple[int, Event]]:
    position = after
    while True:
        timeline = hub.get(execution_id)
        if timeline is not None:
            async for seq, event in timeline.follow(position):
                yield seq, event
            return
        row = executions.get(execution_id)
        for seq, event in executions.events(execution_id, position):
            position = seq
            yield seq, event
        if row is None or row.status.final:
            return
        await asyncio.sleep(poll)
