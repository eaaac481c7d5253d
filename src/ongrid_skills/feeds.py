"""What the HTTP doors stream: an execution's timeline, replayed from the start, then followed.

One function behind every event stream of an execution (REST ``/v1/executions/{id}/events``, the
web console's live parts), so a reloaded page, a reconnecting ``EventSource`` and an API client
see the same numbered events, wherever the call runs (:meth:`Manager.follow`). It only reads;
the doors turn the events into their wire format (and say ``end``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ongrid_skills.execution.records import Event
from ongrid_skills.manager import Manager


async def execution_events(
    manager: Manager, execution_id: str, *, follow: bool = True, after: int = 0
) -> AsyncIterator[tuple[int, Event]]:
    """The numbered events of an execution after number ``after``: those so far, then (with
    ``follow``) live ones until it ends; afterwards ``manager.get`` gives its final state. A door
    checks the execution exists (``manager.get``) before it starts streaming."""
    if not follow:  # what happened so far
        timeline = manager.hub.get(execution_id)
        if timeline is not None:
            events = list(timeline.events)
        else:
            events = manager.store.executions.events(execution_id)
        for seq, event in events:
            if seq > after:
                yield seq, event
        return
    # Wherever the call runs: here, or in another process on the same store (a replica).
    async for seq, event in manager.follow(execution_id, after):
        yield seq, event
