"""The live parts' event streams (Server-Sent Events), for the page scripts in ``static/js``.

The pattern: a route takes the :data:`~ongrid_skills.doors.web.sessions.Session` (checked when
the stream opens), reads a feed of :mod:`ongrid_skills.feeds` and sends each item as one event
with its number as the event id, then ``end``. A browser's ``EventSource`` that reconnects sends
the last id it saw (``Last-Event-ID``), and the stream goes on after it; ``static/js/live.js``
closes the stream on ``end``. The events are those of the REST streams (SPEC §9).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from sse_starlette.sse import EventSourceResponse

from ongrid_skills import feeds
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.manager import Manager

router = APIRouter()


def last_event_id(value: str | None) -> int:
    """The number after which a reconnecting stream goes on (0: from the start)."""
    if value is None or not value.isdigit() or len(value) > 12:
        return 0
    return int(value)


@router.get("/executions/{execution_id}/events")
async def execution_events(
    request: Request,
    execution_id: str,
    _session: Session,
    after: Annotated[int, Query(ge=0, le=10**12)] = 0,
    last_event: Annotated[str | None, Header(alias="last-event-id")] = None,
) -> EventSourceResponse:
    """An execution's timeline: events so far, live ones, then ``end`` with the execution.
    ``?after=N`` starts after event N (a page that lists the first N already); a reconnecting
    browser's ``Last-Event-ID`` goes further when it is larger."""
    manager = manager_of(request)
    manager.get(execution_id)  # NotFound before the stream starts
    start = max(after, last_event_id(last_event))
    return EventSourceResponse(_stream(manager, execution_id, start))


async def _stream(manager: Manager, execution_id: str, after: int) -> AsyncIterator[dict[str, Any]]:
    async for seq, event in feeds.execution_events(manager, execution_id, after=after):
        yield {"event": event.type, "id": str(seq), "data": json.dumps(event.to_dict())}
    yield {"event": "end", "data": manager.get(execution_id).to_json()}
