"""Notices between replicas on PostgreSQL: LISTEN/NOTIFY wakes the followers of a call.

A client may follow a call's timeline from a replica other than the one running it
(:mod:`.follow`). Reading the store again every 100 ms made it late by the event flush
(``ONGRID_EVENT_FLUSH_MS``, 500 ms) plus half a poll, and a faster flush or poll would load the
store. Here each replica keeps one listening connection and one sending connection, and three
channels carry what followers need, none of them writing a row:

- ``ongrid_stored`` (payload: a call's id) is sent by the transaction that stores a call's
  events or changes its row (:meth:`ExecutionRepo.stored`), so it arrives when they are
  committed: the follower reads the store then, never on a timer.
- ``ongrid_follow`` (payload: ``<id> <after>``) says that a client of some replica follows that
  call from event ``after`` on. The replica whose event hub holds the call's live timeline
  starts forwarding it (one forwarder per call, until the call ends).
- ``ongrid_live`` (payload: JSON ``{"id": …, "events": [[seq, ts, type, data], …]}``, at most
  :data:`PAYLOAD_BYTES`) carries the live events of a followed call as they happen, before they
  are stored. An event too large for one notice is not sent: its follower sees the gap and
  reads it from the store once it is committed (``ongrid_stored``).

The follow and live notices are signed (HMAC-SHA256 under a key derived from the audit key,
which every replica of one store shares): a role that may only connect to the database can
send notices too, and a forged live event must never reach a follower's screen. A notice whose
signature does not match is dropped (and counted in the log). Listening needs no privilege in
PostgreSQL either: give CONNECT on the database to the managers' role only (docs/fleet.md).

The store stays the record: a follower yields a live event only when it is the next one it
expects, and reads the store on every ``ongrid_stored``, every gap, and when the listener
(re)connects. The sending connection runs with ``synchronous_commit = off``: a notice costs no
fsync (each is a commit record of a few bytes in the WAL), and notices are sent only while
someone follows from elsewhere.

If the listening connection drops, :attr:`Notices.connected` turns false and every follower
is woken: they fall back to polling the store (:data:`.follow.POLL_SECONDS`) until it is back
(reconnected with a growing delay, at most :data:`MAX_RECONNECT_SECONDS`). SQLite has no
notices: one process, its followers poll.

Notices are event-loop objects: they must never be touched from another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy.engine import URL

from ongrid_skills.execution.records import Event
from ongrid_skills.execution.timeline import EventHub, Timeline
from ongrid_skills.store.executions import STORED_CHANNEL

if TYPE_CHECKING:
    import psycopg

LOG = logging.getLogger("ongrid_skills.fleet")
FOLLOW_CHANNEL = "ongrid_follow"
LIVE_CHANNEL = "ongrid_live"
#: PostgreSQL refuses a payload of 8,000 bytes or more; a notice stays well under (with its
#: signature).
PAYLOAD_BYTES = 7000
#: The ``application_name`` of the listening and of the sending connection (``pg_stat_activity``).
LISTENER_NAME = "ongrid-listen"
SENDER_NAME = "ongrid-notify"
MAX_RECONNECT_SECONDS = 5.0


class Subscription:
    """What one follower of one call was told since it last looked."""

    def __init__(self) -> None:
        self.live: deque[tuple[int, Event]] = deque()
        self.stored = False  # the store has something new (or must be read again)
        self._waiter: asyncio.Future[None] | None = None

    def push(self, events: list[tuple[int, Event]] | None) -> None:
        """Live events, or (None) a change in the store."""
        if events is None:
            self.stored = True
        else:
            self.live.extend(events)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Return once told something, or after ``timeout`` seconds."""
        if self.live or self.stored:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._waiter, timeout)
        except TimeoutError:
            self.stored = True  # look at the store anyway
        finally:
            self._waiter = None


class Notices:
    """This replica's listening and sending connections, its followers, its forwarders."""

    def __init__(self, url: URL, hub: EventHub, key: bytes) -> None:
        self.conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.hub = hub
        self._key = hmac.new(key, digestmod=hashlib.sha256)
        #: Whether the listener is connected; while it is not, followers poll.
        self.connected = False
        #: Counts the connections made: a follower asks again after a reconnect.
        self.generation = 0
        self._subscriptions: dict[str, set[Subscription]] = {}
        self._forwarders: dict[str, asyncio.Task[None]] = {}
        self._sender: psycopg.AsyncConnection[object] | None = None
        self._send_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # ---- the followers' side --------------------------------------------------------------
    @contextmanager
    def subscribe(self, execution_id: str) -> Iterator[Subscription]:
        subscription = Subscription()
        self._subscriptions.setdefault(execution_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            held = self._subscriptions.get(execution_id)
            if held is not None:
                held.discard(subscription)
                if not held:
                    del self._subscriptions[execution_id]

    async def ask(self, execution_id: str, after: int) -> None:
        """Tell every replica that a client here follows the call from event ``after`` on."""
        await self._send(FOLLOW_CHANNEL, f"{execution_id} {after}")

    # ---- the connections ------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())

    async def stop(self) -> None:
        task, self._task = self._task, None
        forwarders = list(self._forwarders.values())
        for pending in [task, *forwarders]:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pending
        sender, self._sender = self._sender, None
        if sender is not None:
            with contextlib.suppress(Exception):
                await sender.close()

    async def _listen(self) -> None:
        import psycopg  # noqa: PLC0415  (only replicas on PostgreSQL pay for its import)

        delay = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, application_name=LISTENER_NAME
                )
                async with conn:
                    for channel in (STORED_CHANNEL, FOLLOW_CHANNEL, LIVE_CHANNEL):
                        await conn.execute(f"LISTEN {channel}")
                    self.connected = True
                    self.generation += 1
                    delay = 0.1
                    LOG.info("notices: listening (followers of other replicas are woken)")
                    self._wake_all()  # what was committed before LISTEN: read the store
                    async for notice in conn.notifies():
                        self._received(notice.channel, notice.payload)
            except asyncio.CancelledError:
                self.connected = False
                raise
            except Exception as exc:  # the database went away: poll until it is back
                if self.connected:
                    LOG.warning("notices: listener lost (%s); followers poll meanwhile", exc)
                self.connected = False
                self._wake_all()
            self.connected = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RECONNECT_SECONDS)

    def _mac(self, channel: str, body: str) -> str:
        mac = self._key.copy()
        mac.update(f"{channel}\n{body}".encode())
        return mac.hexdigest()[:32]

    def _opened(self, channel: str, payload: str) -> str | None:
        """The body of a signed notice, or None (and a warning) when it was forged."""
        signature, _, body = payload.partition(" ")
        if hmac.compare_digest(signature, self._mac(channel, body)):
            return body
        LOG.warning("notices: a notice on %s with a wrong signature was dropped", channel)
        return None

    async def _send(self, channel: str, body: str) -> bool:
        """One signed notice; False when it could not be sent (it is only an acceleration)."""
        import psycopg  # noqa: PLC0415

        payload = f"{self._mac(channel, body)} {body}"
        async with self._send_lock:
            try:
                if self._sender is None or self._sender.closed:
                    self._sender = await psycopg.AsyncConnection.connect(
                        self.conninfo, autocommit=True, application_name=SENDER_NAME
                    )
                    await self._sender.execute("SET synchronous_commit = off")
                await self._sender.execute("SELECT pg_notify(%s, %s)", (channel, payload))
                return True
            except psycopg.Error as exc:
                LOG.debug("notices: could not send on %s: %s", channel, exc)
                if self._sender is not None:
                    with contextlib.suppress(Exception):
                        await self._sender.close()
                self._sender = None
                return False

    def _wake_all(self) -> None:
        for held in self._subscriptions.values():
            for subscription in held:
                subscription.push(None)

    def _received(self, channel: str, payload: str) -> None:
        if channel == STORED_CHANNEL:
            for subscription in self._subscriptions.get(payload, ()):
                subscription.push(None)
            return
        body = self._opened(channel, payload)
        if body is None:
            return
        if channel == LIVE_CHANNEL:
            self._live(body)
        elif channel == FOLLOW_CHANNEL:
            execution_id, _, after = body.partition(" ")
            timeline = self.hub.get(execution_id)
            if timeline is not None and execution_id not in self._forwarders and after.isdigit():
                task = asyncio.get_running_loop().create_task(
                    self._forward(execution_id, timeline, int(after))
                )
                self._forwarders[execution_id] = task
                task.add_done_callback(lambda _t: self._forwarders.pop(execution_id, None))

    def _live(self, payload: str) -> None:
        try:
            message = json.loads(payload)
            held = self._subscriptions.get(message["id"])
            if not held:
                return
            events = [
                (int(seq), Event(str(kind), dict(data), float(ts)))
                for seq, ts, kind, data in message["events"]
            ]
        except (ValueError, KeyError, TypeError):
            LOG.warning("notices: a malformed live notice was ignored")
            return
        for subscription in held:
            subscription.push(events)

    # ---- the running replica's side -------------------------------------------------------
    async def _forward(self, execution_id: str, timeline: Timeline, position: int) -> None:
        """Send the call's events after ``position`` as they come, until it has ended. What
        arrives while a notice is sent goes in the next one (up to :data:`PAYLOAD_BYTES`)."""
        head = f'{{"id": {json.dumps(execution_id)}, "events": ['
        while True:
            await timeline.grown(position)
            pending = timeline.events[position:]
            if not pending:
                return  # finished, every event sent
            parts: list[str] = []
            size = len(head) + 2
            for seq, event in pending:
                part = json.dumps([seq, event.ts, event.type, event.data], ensure_ascii=False)
                length = len(part.encode()) + 2
                if length + len(head) + 2 > PAYLOAD_BYTES:  # never fits: read from the store
                    if parts:
                        break
                    position = seq
                    continue
                if size + length > PAYLOAD_BYTES:
                    break
                parts.append(part)
                size += length
                position = seq
            if parts:
                await self._send(LIVE_CHANNEL, head + ", ".join(parts) + "]}")


__all__ = [
    "FOLLOW_CHANNEL",
    "LISTENER_NAME",
    "LIVE_CHANNEL",
    "SENDER_NAME",
    "Notices",
    "Subscription",
]
