"""Following a call's timeline from any process: its live timeline here, else the store.

A call runs in one process, and its live timeline is in that process's event hub; its events
reach the store in batches (``ONGRID_EVENT_FLUSH_MS`` after the first of each batch, and all of
them with the outcome). A client of another process (another replica on a shared database, or a
server beside a CLI on the same data dir) sees the same numbered events: the stored ones first,
then those stored since, read again every :data:`POLL_SECONDS` until the call's row is final.
Polling the store was chosen over PostgreSQL's LISTEN/NOTIFY: the batches bound the delay anyway
(see docs/fleet.md for the measured figures), it needs no extra connection per replica, and the
same code serves SQLite.

Why the order of the reads: the row is read before the events, and the outcome is written in the
same transaction as the last events; so when the row read is final, the events read after it
are all of them. A call that starts running here meanwhile (an approval signed on this replica)
is followed on from its live timeline, whose numbering is the store's.

This module never writes the store, and never opens a timeline in the hub.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ongrid_skills.execution.records import Event
from ongrid_skills.execution.timeline import EventHub
from ongrid_skills.store.executions import ExecutionRepo

POLL_SECONDS = 0.1


async def follow(
    hub: EventHub,
    executions: ExecutionRepo,
    execution_id: str,
    after: int = 0,
    poll: float = POLL_SECONDS,
) -> AsyncIterator[tuple[int, Event]]:
    """The call's events after number ``after``, in order, until it has ended."""
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
