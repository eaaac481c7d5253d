"""``GET /v1/approvals/events``: the approval inbox, live, as Server-Sent Events.

What a watcher (``ongrid-skills approvals watch``, the web console's inbox) needs to miss
nothing: the requests pending now, a ``ready`` marker, then every change of any request as the
desk makes it, until the client leaves. Each event's data is the request exactly as
``GET /v1/approvals/{id}`` shows it. The stream only reads: deciding stays the desk's
(:mod:`ongrid_skills.approvals.desk`), telling the changes its feed's
(:mod:`ongrid_skills.approvals.feed`). Its router is mounted before the routes of
:mod:`ongrid_skills.doors.rest.routes`, where ``/v1/approvals/{approval_id}`` would take
``events`` for an id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from sse_starlette.sse import EventSourceResponse

from ongrid_skills import feeds
from ongrid_skills.approvals.feed import KINDS
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.doors.rest.routes import Caller, Mgr
from ongrid_skills.manager import Manager

router = APIRouter()

#: Seconds between the comment lines that keep an idle stream open through proxies.
HEARTBEAT_SECONDS = 15.0

_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "Server-Sent Events: one `requested` event per pending request, `ready`, then "
            f"each change of any request ({', '.join(sorted(KINDS))}); the data of each is "
            "the request as `GET /v1/approvals/{approval_id}` answers it (`ready`: "
            f'`{{"pending": N}}`). A comment line every {HEARTBEAT_SECONDS:g} s keeps it open.'
        ),
        "content": {
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "event": {"type": "string", "enum": sorted(KINDS | {"ready"})},
                        "data": {"type": "string", "description": "JSON text"},
                    },
                    "required": ["event", "data"],
                }
            }
        },
    }
}


@router.get(
    "/v1/approvals/events", response_class=EventSourceResponse, responses={**_ANSWER, **responses()}
)
async def approval_events(
    manager: Mgr, _caller: Caller, follow: bool = True
) -> EventSourceResponse:
    """The approval inbox, live: the pending requests (oldest first, each as a `requested`
    event), a `ready` event, then (``follow``, the default) every change of any request until
    the client disconnects. ``follow=false`` ends the stream after `ready`."""
    return EventSourceResponse(_inbox(manager, follow), ping=HEARTBEAT_SECONDS)


async def _inbox(manager: Manager, follow: bool) -> AsyncIterator[dict[str, Any]]:
    async for kind, body in feeds.approval_inbox(manager, follow=follow):
        yield {"event": kind, "data": json.dumps(body, ensure_ascii=False)}
