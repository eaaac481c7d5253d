"""Live timelines: every event of a running execution, numbered, kept in memory and fanned out.

Subscribers (SSE streams, the MCP server, the agent) replay what happened so far and then follow
live events until the execution ends. Events are persisted by the manager in batches; once an
execution is finished and persisted it leaves the hub and is replayed from the store.

Timelines are event-loop objects: they must never be touched from another thread (a sync
built-in's events are handed over with ``call_soon_threadsafe``), and this module never writes
the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field

from ongrid_skills.execution.records import Event


@dataclass(slots=True)
class Timeline:
    """The numbered events of one execution (from 1) and the followers waiting for more."""

    events: list[tuple[int, Event]] = field(default_factory=list)
    finished: bool = False
    flushed: int = 0  # how many events are already in the store
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def append(self, event: Event) -> int:
        """Add an event and wake the followers; return its number."""
        seq = len(self.events) + 1
        self.events.append((seq, event))
        self._wake()
        return seq

    def finish(self) -> None:
        """Mark the end: followers return once they have read every event."""
        self.finished = True
        self._wake()

    @contextmanager
    def flushing(self) -> Iterator[list[tuple[int, Event]]]:
        """The events not stored yet. They count as stored only when the block completes: a
        write that fails (a full disk) leaves them for the next flush instead of losing them."""
        start = self.flushed
        pending = self.events[start:]
        yield pending
        self.flushed = max(self.flushed, start + len(pending))

    def _wake(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()

    async def grown(self, position: int) -> None:
        """Return once there are events after number ``position`` or the timeline finished."""
        while position >= len(self.events) and not self.finished:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiters.add(waiter)
            try:
                await waiter
            finally:
                self.waiters.discard(waiter)

    async def follow(self, after: int = 0) -> AsyncIterator[tuple[int, Event]]:
        """The events after number ``after``, then live ones until the timeline finishes."""
        position = after
        while True:
            while position < len(self.events):
                yield self.events[position]
                position += 1
            if self.finished:
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiters.add(waiter)
            try:
                await waiter
            finally:
                self.waiters.discard(waiter)


class EventHub:
    """The live timelines by execution id; an execution leaves it once it has ended."""

    def __init__(self) -> None:
        self._timelines: dict[str, Timeline] = {}

    def open(self, execution_id: str) -> Timeline:
        """The execution's timeline, created empty when it has none."""
        timeline = self._timelines.get(execution_id)
        if timeline is None:
            timeline = self._timelines[execution_id] = Timeline()
        return timeline

    def get(self, execution_id: str) -> Timeline | None:
        return self._timelines.get(execution_id)

    def close(self, execution_id: str) -> None:
        """Finish an execution's timeline and drop it from the hub."""
        timeline = self._timelines.pop(execution_id, None)
        if timeline is not None:
            timeline.finish()

    def close_when(self, execution_id: str, settled: Future[None]) -> None:
        """:meth:`close` once ``settled`` (a future of another thread: the commit of the
        call's outcome) is done; at once when it is. Called on the timeline's event loop."""
        if settled.done():
            self.close(execution_id)
            return
        loop = asyncio.get_running_loop()

        def closing(_settled: Future[None]) -> None:
            # In the committing thread: the timeline leaves the hub at once (one dict operation;
            # whoever looks from now on reads the committed store), and its followers are woken
            # on their loop. A loop that has stopped or closed has no followers left to wake.
            timeline = self._timelines.pop(execution_id, None)
            if timeline is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(timeline.finish)

        settled.add_done_callback(closing)

    def __len__(self) -> int:
        return len(self._timelines)
