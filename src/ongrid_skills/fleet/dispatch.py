"""The manager's end of the bus: the hosts it sees, and the calls it hands to them.

:class:`Fleet` connects to NATS (:mod:`.bus`), follows the hosts bucket into :class:`.catalogue.
Hosts` (a watcher, re-made after every reconnection), reads the events stream of its own calls
(a durable push consumer ``m-<manager id>`` on ``<prefix>.event.<manager id>.>``), and runs
:meth:`Fleet.run` for each admitted call of a host skill. A call's life here:

1. The host must be online, verified (its entry signed by a key trusted for it: :mod:`.attest`)
   and announce the definition the call was admitted (or approved) with, else the call fails at
   once: ``host_offline``, ``host_unverified`` or ``definition_changed``.
2. The call is signed (:mod:`.signing`: a nonce, an expiry one TTL away; the skill's class and
   the signatures its class needs, which the worker checks against its own) and published to the
   calls stream under the message id ``<call id>:call``, retried through a bus outage until
   the expiry (JetStream drops a duplicate publication).
3. The host must take it (its ``accepted`` message) before the expiry plus the clock skew
   allowed; otherwise the message is deleted from the stream and the call fails
   ``host_offline``. After the expiry a worker refuses it anyway, so it can never run later.
   A host that goes offline first ends the wait then (within its TTL): the message is deleted,
   and the call fails ``host_offline`` if NATS never delivered it (it cannot run), else it is
   ``interrupted`` (the frozen host holds it, and runs it if it resumes before the expiry).
4. The host's events enter the call's timeline as they come, in order (numbered; a repeated
   number is dropped, one that comes before an earlier one waits for it); the ``outcome``
   message ends the call with the host's record of it.
5. A host that goes offline (no heartbeat for its TTL) or restarts (a new instance) while it
   runs the call makes it ``interrupted``; a cancel here sends a signed cancel to the host. From
   then on, whatever the host still sends about the call is ignored: its record is final.

This module never runs a process, never writes the store and never decides whether a call may
run (the manager asked the gate before calling :meth:`Fleet.run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.kv import KeyValue

from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Execution, Status
from ongrid_skills.fleet import bus, untaken
from ongrid_skills.fleet.acks import Acks
from ongrid_skills.fleet.attest import KEYS_SETTING, KeysFile
from ongrid_skills.fleet.catalogue import Hosts
from ongrid_skills.fleet.signing import CLOCK_SKEW_SECONDS, Call, new_nonce, sign
from ongrid_skills.fleet.untaken import local as _local
from ongrid_skills.fleet.untaken import when as _when
from ongrid_skills.fleet.wire import BATCHES_HEADER, Message, apply_outcome, decode
from ongrid_skills.governance.policy import signatures_for
from ongrid_skills.metrics import Metrics
from ongrid_skills.packs.keys import SigningKey
from ongrid_skills.settings import Settings
from ongrid_skills.skills.model import HOST_ARG, Skill

LOG = logging.getLogger("ongrid_skills.fleet")
#: How long a manager's consumer outlives the manager (it is made anew at each start).
CONSUMER_INACTIVE_SECONDS = 3600.0
FIRST_SNAPSHOT_SECONDS = 5.0
CANCEL_PUBLISH_SECONDS = 2.0
CLOSE_SECONDS = 5.0  # the longest a stop waits for the bus tasks and the NATS connection
#: How many messages of one call may wait for an earlier one (a worker publishes what it has
#: queued together; a retry can have a message stored after later ones).
MAX_AHEAD = 10_000
#: Extra time allowed for a host to take a call, beyond the signed expiry.
TAKE_MARGIN_SECONDS = 2.0


@dataclass(slots=True)
class Pending:
    """One call handed to a host, as long as its record here is not final."""

    execution: Execution
    host: str
    emit: EventSink
    done: asyncio.Future[tuple[dict[str, Any], str | None]]
    accepted: asyncio.Event = field(default_factory=asyncio.Event)
    accepted_at: float | None = None  # this manager's clock
    #: What became of the host ("went offline: …") while it had not taken the call yet.
    lost: str | None = None
    woken: asyncio.Event = field(default_factory=asyncio.Event)  # set with ``lost``
    instance: str | None = None
    seq: int = 0
    parts: list[str] = field(default_factory=list)
    #: Messages numbered past one not received yet (a worker's retry stored it later).
    ahead: dict[int, Message] = field(default_factory=dict)


class Fleet:
    """This manager's view of the hosts, and its calls on them."""

    def __init__(
        self,
        settings: Settings,
        key: SigningKey,
        manager_id: str,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.key = key
        self.id = manager_id
        self.metrics = metrics
        self.names = bus.Names(settings.fleet_prefix)
        self.ttl = float(settings.fleet_ttl_seconds)
        self.worker_keys = KeysFile(settings.fleet_worker_keys)  # a bad file: refuse to start
        self.hosts = Hosts(clock, self.worker_keys.keys, self.ttl)
        self.pending: dict[str, Pending] = {}
        #: Called (in the loop) after the offered host skills changed.
        self.on_change: Callable[[], None] = lambda: None
        self.connected = False
        self.closing = False
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._kv: KeyValue | None = None
        self._rewatch = asyncio.Event()
        self._snapshot = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._acks = Acks()

    # ---- life ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, create what is missing, read the hosts once, then follow them."""
        self._nc = await bus.connect(
            self.settings,
            f"ongrid-skills manager {self.id}",
            disconnected=self._disconnected,
            reconnected=self._reconnected,
            first_attempts=bus.MANAGER_FIRST_ATTEMPTS,
            ttl=self.ttl,
            inbox=self.names.manager_inbox,
        )
        self.connected = True
        self._js = self._nc.jetstream()
        self._kv = await bus.ensure(self._js, self.names, self.ttl)
        await self._js.subscribe(
            f"{self.names.reply_prefix(self.id)}.>",
            durable=self.names.manager_consumer(self.id),
            stream=self.names.events_stream,
            cb=self._on_message,
            manual_ack=True,
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,
                inactive_threshold=CONSUMER_INACTIVE_SECONDS,
                max_ack_pending=10_000,
            ),
        )
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watch()), loop.create_task(self._tick())]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._snapshot.wait(), FIRST_SNAPSHOT_SECONDS)
        LOG.info(
            "fleet: manager %s on %s, %d host(s) online",
            self.id,
            self.names.prefix,
            sum(1 for s in self.hosts.hosts.values() if self.hosts.online(s.host)),
        )
        if not self.worker_keys.keys.configured:
            LOG.warning(
                "fleet: %s is not set: no worker is trusted, so no host skill is offered; "
                "trust each worker's key (`ongrid-skills worker --print-key`, docs/fleet.md)",
                KEYS_SETTING,
            )

    async def close(self) -> None:
        self.closing = True
        for task in self._tasks:
            task.cancel()
        # Bounded: a stop must not hang on a bus that stopped answering mid-close.
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=CLOSE_SECONDS)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._acks.flush(), CLOSE_SECONDS)
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.close(), CLOSE_SECONDS)

    async def _disconnected(self) -> None:
        self.connected = False
        if not self.closing:
            LOG.warning("fleet: disconnected from NATS; reconnecting")

    async def _reconnected(self) -> None:
        self.connected = True
        self.hosts.grace()
        self._rewatch.set()
        LOG.warning("fleet: reconnected to NATS")

    # ---- hosts -----------------------------------------------------------------------------
    async def _watch(self) -> None:
        while True:
            try:
                assert self._kv is not None
                watcher = await self._kv.watchall()
            except Exception as exc:  # the bus is away: try again shortly
                LOG.debug("fleet: hosts watch failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            self._rewatch.clear()
            try:
                while not self._rewatch.is_set():
                    try:
                        entry = await watcher.updates(timeout=1.0)  # type: ignore[no-untyped-call]
                    except nats.errors.TimeoutError:  # nothing new
                        continue
                    if entry is None:
                        self._snapshot.set()
                        continue
                    self._entry(entry.key, entry.value, entry.operation)
            finally:
                with contextlib.suppress(Exception):
                    await watcher.stop()  # type: ignore[no-untyped-call]

    def _entry(self, key: str, value: bytes | None, operation: str | None) -> None:
        if operation in ("DEL", "PURGE") or value is None:
            changed, replaced = self.hosts.remove(key), None
            if changed:
                self._lost(key, f"stopped (its worker left the bus at {_when(time.time())})")
        else:
            changed, replaced = self.hosts.apply(key, value)
        if replaced is not None:
            self._lost(key, "restarted (a new instance announced itself)", instance=replaced)
        self._observe(key)
        if changed:
            self.on_change()

    async def _tick(self) -> None:
        period = max(0.05, min(1.0, self.ttl / 10))
        while True:
            await asyncio.sleep(period)
            if self.worker_keys.refresh():  # each host's next entry is checked with them
                self.hosts.keys = self.worker_keys.keys
            if not self.connected:  # heartbeats we cannot hear prove nothing
                continue
            gone = self.hosts.expire()
            for host in gone:
                state = self.hosts.hosts[host]
                ttl = state.announcement.ttl
                last = time.time() - (self.hosts.clock() - state.seen)
                self._lost(host, f"went offline: no heartbeat for {ttl:g} s since {_when(last)}")
            if gone:
                self._observe(*gone)
                self.on_change()

    def _lost(self, host: str, what: str, *, instance: str | None = None) -> None:
        """The host ``what`` (went offline, stopped): interrupt the calls it took (of
        ``instance`` only, when given), and wake the calls it has not taken yet (not for a
        restart: the new instance takes those from the stream)."""
        for call in list(self.pending.values()):
            if call.host != host or call.done.done():
                continue
            if not call.accepted.is_set():
                if instance is None:
                    call.lost = what
                    call.woken.set()
                continue
            if instance is not None and call.instance != instance:
                continue
            why = f"host {host} took the call at {_when(call.accepted_at)} and then {what}"
            LOG.warning("call %s interrupted: %s", call.execution.id, why)
            call.done.set_result((_local("interrupted", "interrupted", why), None))

    def _observe(self, *hosts: str) -> None:
        """Set the metrics of these hosts (a heartbeat touches its own host only)."""
        for host in hosts:
            state = self.hosts.hosts.get(host)
            # A host never verified gets no series: its id is whatever the bucket's writer chose.
            if state is not None and state.verified_instance is not None:
                here = sum(1 for c in self.pending.values() if c.host == host)
                self.metrics.host_seen(state.to_dict(here))

    def hosts_view(self) -> list[dict[str, Any]]:
        """``GET /v1/hosts``: every known host, online first, then by id."""
        out = []
        for state in self.hosts.hosts.values():
            here = sum(1 for c in self.pending.values() if c.host == state.host)
            out.append(state.to_dict(here))
        return sorted(out, key=lambda h: (not h["online"], h["host"]))

    def host_problem(self, skill: Skill, args: Any) -> ErrorInfo | None:
        """Why a call of this host skill cannot go where its args say, or None."""
        return self.hosts.problem(skill, args)

    def refused(self, args: Any, status: str) -> None:
        """Count a call refused before it was sent (``host_offline``…) on its host's series,
        when the host is one this manager knows: the name is the caller's, and a metric label
        must not take any value a caller types."""
        host = args.get(HOST_ARG) if isinstance(args, dict) else None
        if isinstance(host, str) and host in self.hosts.hosts:
            self.metrics.host_call(host, status, None)

    # ---- calls -----------------------------------------------------------------------------
    async def run(
        self, skill: Skill, execution: Execution, emit: EventSink, *, preview: bool = False
    ) -> None:
        """Run one admitted call of a host skill on its host; fill ``execution`` in place.
        ``preview``: the preview of a request (SPEC §20), sent as a safe call marked so: the
        host runs the preview it declared (its args merged over these, or its preview entry),
        never the real call."""
        started = time.monotonic()
        execution.status = Status.RUNNING
        execution.started_at = time.time()
        problem = self.host_problem(skill, execution.args)
        host = str(execution.args.get(HOST_ARG))
        if problem is not None:
            self._end(execution, emit, Status.FAILED, problem)
            self.metrics.host_call(host, execution.status.value, None)
            return
        args = {k: v for k, v in execution.args.items() if k != HOST_ARG}
        now = time.time()
        call = Call(
            kind="call",
            id=execution.id,
            host=host,
            skill=skill.name,
            definition_hash=skill.definition_hash,
            skill_class=skill.skill_class.value,
            signatures=signatures_for(skill.skill_class, skill.confirmation_required),
            args=args,
            nonce=new_nonce(),
            issued_at=now,
            expires_at=now + self.ttl,
            reply=self.names.reply_prefix(self.id),
            credentials=dict(skill.placement.credentials) if skill.placement else {},
            preview=preview,
        )
        loop = asyncio.get_running_loop()
        pending = Pending(execution, host, emit, loop.create_future())
        self.pending[execution.id] = pending
        try:
            emit(Event("dispatched", {"host": host}))
            outcome, result = await self._hand_over(call, pending)
            apply_outcome(execution, outcome, result)
            if outcome.get("local"):  # decided here: the host sent no final status
                reason = execution.error.message if execution.error else None
                emit(Event("status", {"status": execution.status.value, "reason": reason}))
        except asyncio.CancelledError:
            await self._cancel(call)
            raise
        finally:
            self.pending.pop(execution.id, None)
            elapsed = (time.monotonic() - started) * 1000
            self.metrics.host_call(host, execution.status.value, elapsed)

    async def _hand_over(self, call: Call, pending: Pending) -> tuple[dict[str, Any], str | None]:
        seq = await self._publish(call, f"{call.id}:call")
        if seq is None:  # retried until the expiry: no worker would take it now
            why = f"the call could not be handed to NATS for host {call.host} before it expired"
            return _local("failed", "host_offline", why), None
        deadline = call.expires_at + CLOCK_SKEW_SECONDS + TAKE_MARGIN_SECONDS - time.time()
        taken: asyncio.Future[Any] = asyncio.ensure_future(pending.accepted.wait())
        woken: asyncio.Future[Any] = asyncio.ensure_future(pending.woken.wait())
        # A refusal of the host (call_expired…) ends the call without a take; the host going
        # offline ends the wait at once (_lost).
        any_of: set[asyncio.Future[Any]] = {taken, woken, pending.done}
        try:
            await asyncio.wait(any_of, timeout=max(0.0, deadline), return_when="FIRST_COMPLETED")
        finally:
            taken.cancel()
            woken.cancel()
        if pending.done.done():
            return pending.done.result()
        if pending.lost is not None:
            if pending.accepted.is_set():  # its "accepted" came in after it was seen gone
                why = (
                    f"host {call.host} {pending.lost}; its word that it took the call came "
                    f"only after that, at {_when(pending.accepted_at)}: what it reports is ignored"
                )
                return _local("interrupted", "interrupted", why), None
            return await untaken.lost(self._js, self.names, call, seq, pending.lost), None
        if pending.accepted.is_set():
            return await pending.done
        await untaken.withdraw(self._js, self.names, seq)
        return untaken.expired(call), None

    async def _publish(
        self, call: Call, message_id: str, *, until: float | None = None
    ) -> int | None:
        """Publish a signed message, retried through an outage; its stream sequence, or None
        when it could not be stored before ``until`` (default: the call's expiry)."""
        body, headers = sign(self.key, call)
        headers["Nats-Msg-Id"] = message_id
        headers[BATCHES_HEADER] = "1"  # this manager reads a call's messages batched
        limit = until if until is not None else call.expires_at
        pause = 0.05
        while True:
            try:
                assert self._js is not None
                ack = await self._js.publish(
                    self.names.call_subject(call.host), body, timeout=2.0, headers=headers
                )
                return int(ack.seq)
            except Exception as exc:
                if time.time() + pause > limit:
                    LOG.warning("call %s: could not be handed to the bus: %s", call.id, exc)
                    return None
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

    async def _cancel(self, call: Call) -> None:
        now = time.time()
        cancel = Call(
            kind="cancel",
            id=call.id,
            host=call.host,
            skill=call.skill,
            definition_hash=call.definition_hash,
            skill_class=call.skill_class,
            signatures=call.signatures,
            args=None,
            nonce=new_nonce(),
            issued_at=now,
            expires_at=now + self.ttl,
            reply=call.reply,
        )
        with contextlib.suppress(Exception):
            await self._publish(cancel, f"{call.id}:cancel", until=now + CANCEL_PUBLISH_SECONDS)

    async def _on_message(self, msg: Msg) -> None:
        """One message of one of our calls, from the events stream (acked in any case, once
        handled: those that do not end a call with the one that does, :mod:`.acks`; the call
        resumes before the acknowledgements are written)."""
        call_id = msg.subject.rsplit(".", 1)[-1]
        pending = self.pending.get(call_id)
        self._acks.hold(msg)
        # A late message about a call whose record is final here is ignored.
        if pending is not None and not pending.done.done():
            for message in decode(msg.data):
                self._receive(pending, message)
            if pending.done.done():
                await self._acks.flush()

    def _receive(self, pending: Pending, message: Message) -> None:
        if pending.done.done() or message.seq <= pending.seq:
            return
        if message.seq > pending.seq + 1:  # stored ahead of one retried: held until it comes
            if len(pending.ahead) < MAX_AHEAD:
                pending.ahead[message.seq] = message
            return
        self._take(pending, message)
        while pending.seq + 1 in pending.ahead and not pending.done.done():
            self._take(pending, pending.ahead.pop(pending.seq + 1))

    def _take(self, pending: Pending, message: Message) -> None:
        """The next message of a call, in order."""
        pending.seq = message.seq
        if message.type == "accepted":
            pending.accepted_at = time.time()
            instance = message.data.get("instance")
            pending.instance = instance if isinstance(instance, str) else None
            pending.accepted.set()
            pending.emit(Event("accepted", {"host": pending.host}, message.ts))
        elif message.type == "result_part":
            text = message.data.get("text")
            pending.parts.append(text if isinstance(text, str) else "")
        elif message.type == "outcome":
            result = "".join(pending.parts) if message.data.get("has_result") else None
            pending.done.set_result((message.data, result))
        else:
            pending.emit(Event(message.type, message.data, message.ts))

    def _end(self, execution: Execution, emit: EventSink, status: Status, error: ErrorInfo) -> None:
        execution.status = status
        execution.error = error
        execution.finished_at = time.time()
        emit(Event("status", {"status": status.value, "reason": error.message}))
