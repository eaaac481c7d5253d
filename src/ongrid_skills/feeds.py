"""What the HTTP doors stream: an execution's timeline, replayed from the start, then followed.

One function behind every event stream of an execution (REST ``/v1/executions/{id}/events``, the
web console's live parts), so a reloaded page, a reconnecting ``EventSource`` and an API client
see the same numbered events. It reads the manager's hub and store and never writes anything but
the hub's own timeline; the doors turn the events into their wire format (and say ``end``).
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
    timeline = manager.hub.get(execution_id)
    if timeline is None:
        if manager.get(execution_id).status.final or not follow:
            for seq, event in manager.store.executions.events(execution_id):
                if seq > after:
                    yield seq, event
            return
        # Not started yet (pending approval, queued): open its timeline now, so the events of
        # its run reach this follower; what was stored so far comes first.
        timeline = manager.hub.open(execution_id)
        if not timeline.events:
            timeline.events.extend(manager.store.executions.events(execution_id))
            timeline.flushed = len(timeline.events)
    if not follow:  # what happened so far
        for seq, event in list(timeline.events):
            if seq > after:
                yield seq, event
        return
    async for seq, event in timeline.follow(after):
        yield seq, event
