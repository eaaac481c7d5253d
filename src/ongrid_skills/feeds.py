"""What the HTTP doors stream: an execution's timeline, replayed from the start, then followed;
and the approval inbox, live.

One function behind every event stream of an execution (REST ``/v1/executions/{id}/events``, the
web console's live parts), so a reloaded page, a reconnecting ``EventSource`` and an API client
see the same numbered events, wherever the call runs (:meth:`Manager.follow`). One function
behind every inbox stream (REST ``/v1/approvals/events``, the console's ``/approvals/events``), so
both miss nothing in the same way. They only read; the doors turn the items into their wire format
(and say ``end``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

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


async def approval_inbox(
    manager: Manager,
    *,
    follow: bool = True,
    still_open: Callable[[], bool] | None = None,
    check_every: float = 10.0,
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The inbox as ``(kind, request body)`` pairs: a ``requested`` pair per pending request
    (oldest first), ``("ready", {"pending": N})``, then (``follow``) every change of any request
    as the desk tells it, until the caller stops reading. The bodies are the requests as
    ``GET /v1/approvals/{id}`` shows them.

    With ``still_open``, asked every ``check_every`` seconds while nothing happens (and before
    each change is given): the stream ends as soon as it answers False (a web session that was
    logged out). Each pause also expires the requests that are due, so a watcher sees a request
    expire within ``check_every`` seconds even between the desk's sweeps.
    """
    desk = manager.desk
    # Listen before reading the pending requests: a request made in between is then in both
    # (and given once), never in neither.
    with desk.feed.listen() as listener:
        desk.expire_due()
        pending = list(reversed(manager.store.approvals.with_status("pending")))
        sent = {approval.id for approval in pending}
        for approval in pending:
            yield "requested", approval.to_dict()
        yield "ready", {"pending": len(pending)}
        while follow:
            try:
                told = await asyncio.wait_for(listener.get(), check_every)
            except TimeoutError:
                # Nothing lost: Listener.get takes an item only after its wait, never during it.
                if still_open is not None and not still_open():
                    return
                desk.expire_due()
                continue
            if told is None:  # fell BACKLOG events behind: end; a client reconnects
                return
            if still_open is not None and not still_open():
                return
            kind, body = told
            if kind == "requested" and body["id"] in sent:
                continue
            yield kind, body
