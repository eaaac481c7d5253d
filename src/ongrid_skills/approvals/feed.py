"""The live feed of approval requests: each change the desk makes, fanned out to listeners.

The desk tells the feed (:meth:`ApprovalFeed.hear`) what happened to a request (``requested``,
``signed``, ``approved``, ``rejected``, ``expired``, ``cancelled``, ``void``, ``reviewed``
when the reviewer's opinion is attached, ``previewed`` when the request's preview ended) once
the transaction that did it committed, with the request read back (``tell`` reads it itself,
by id); the feed hands its body, as ``GET /v1/approvals/{id}`` shows it, to every listener
(the inbox streams). Nobody listening costs nothing: the desk reads the request back only
when someone listens.

A listener holds at most :data:`BACKLOG` undelivered events. One that falls further behind (a
client that stopped reading) is marked lost and its stream ends, rather than growing without
bound; a client that reconnects is sent the pending requests again.

Listeners are event-loop objects, like timelines: the feed must never be told from another
thread. It never writes the store and never decides anything about a request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from ongrid_skills.notify.events import ApprovalEvent

#: What the desk tells: the event types of the stream, one per change of a request.
KINDS = frozenset(
    {
        "requested",
        "signed",
        "approved",
        "rejected",
        "expired",
        "cancelled",
        "void",
        "reviewed",
        "previewed",
    }
)
#: Undelivered events a listener may hold before it is dropped.
BACKLOG = 1000

Body = dict[str, Any]


class Shown(Protocol):
    """A request as the store gives it back: it shows itself as its API body."""

    def to_dict(self) -> Body: ...


class Listener:
    """One subscriber: the events told since it started listening, in order."""

    def __init__(self, backlog: int = BACKLOG) -> None:
        self.backlog = backlog
        self.lost = False
        self._items: deque[tuple[str, Body]] = deque()
        self._wake = asyncio.Event()

    def put(self, kind: str, body: Body) -> None:
        if self.lost:
            return
        if len(self._items) >= self.backlog:
            self.lost = True
            self._items.clear()
        else:
            self._items.append((kind, body))
        self._wake.set()

    async def get(self) -> tuple[str, Body] | None:
        """The next event, waiting for it; None once this listener is lost."""
        while not self._items and not self.lost:
            self._wake.clear()
            await self._wake.wait()
        if self.lost:
            return None
        return self._items.popleft()


class ApprovalFeed:
    """Tells listeners about changes of requests; ``read`` gives a request back by id."""

    def __init__(self, read: Callable[[str], Shown | None]) -> None:
        self._read = read
        self._listeners: set[Listener] = set()

    def tell(self, kind: str, approval_id: str) -> None:
        """A request changed (``kind`` is one of :data:`KINDS`); called after the commit."""
        if not self._listeners:
            return
        approval = self._read(approval_id)
        if approval is None:
            return
        body = approval.to_dict()
        for listener in list(self._listeners):
            listener.put(kind, body)

    def hear(self, event: ApprovalEvent) -> None:
        """A change the desk committed, with the request it read back: to every listener."""
        if not self._listeners:
            return
        body = event.approval.to_dict()
        for listener in list(self._listeners):
            listener.put(event.kind, body)

    @contextmanager
    def listen(self, backlog: int = BACKLOG) -> Iterator[Listener]:
        """A listener for the duration of the block."""
        listener = Listener(backlog)
        self._listeners.add(listener)
        try:
            yield listener
        finally:
            self._listeners.discard(listener)

    def __len__(self) -> int:
        return len(self._listeners)
