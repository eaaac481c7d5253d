"""The edge worker: announces this host's skills on the bus and runs the calls managers sign.

``ongrid-skills worker`` wires one :class:`Worker`: the registry of this host's own allow-listed
dirs (the same loader), a NATS connection, the managers' public keys, the runner and the ledger.

- Inventory: the entry ``<host id>`` of the hosts bucket (:mod:`.inventory`), written at start,
  every third of the TTL (the heartbeat), and at once after a reload; deleted on a clean stop.
- Calls: a durable pull consumer on ``<prefix>.call.<host id>``. Each message is checked —
  signature by a trusted manager key, then this host, the expiry, and the ledger (a call id or a
  nonce seen before) — and only then recorded as taken (committed), acknowledged, and run
  through the same :func:`~ongrid_skills.execution.pipeline.run_skill` and runner as the
  manager's, with this host's limits. A refused message is acknowledged (never redelivered)
  and logged; only a call with a valid signature that was never taken gets a reply.
- A call marked as a request's preview (SPEC §20) runs the skill's own declared preview as a
  safe call (signed safe, no signature): its preview entry, or its entry with the preview's
  args merged over the call's; never its real call. A skill that declares none refuses it
  (``no_preview``).
- Before running, the skill must be one of this host's host skills, and its fleet definition
  hash, its class and the signatures its class needs must be those the manager signed (what its
  gate decided with), else the call fails ``definition_changed``: a worker never receives code,
  only the name of what it already has, and a manager misled about a skill (a dangerous one
  taken for safe) cannot run it here as such.
- The inventory is signed with this worker's own key (:mod:`.attest`): the managers believe
  what a key they trust for this host id signed, and nothing else.
- Events stream back live in order (:class:`.wire.Sender`); a cancel (signed too) or the skill's
  timeout kills the process group, as on the manager.
- A bus outage is waited out: the consumer, heartbeat and senders retry; a worker cut off for
  longer than the TTL cancels its running calls, which the managers have recorded
  ``interrupted`` by then.

It never executes anything a message names but a skill of its own registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.kv import KeyValue

from ongrid_skills.builtins.base import Reach
from ongrid_skills.execution.grant import Grants
from ongrid_skills.execution.pipeline import grant_for, run_skill
from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status
from ongrid_skills.execution.runner import Runner
from ongrid_skills.fleet import bus
from ongrid_skills.fleet.attest import seal
from ongrid_skills.fleet.inventory import definition_hash, hosted, record_of, skills_digest
from ongrid_skills.fleet.nonces import Ledger
from ongrid_skills.fleet.previews import dry_run
from ongrid_skills.fleet.signing import Call, Refused, check, verify
from ongrid_skills.fleet.wire import BATCHES_HEADER, Sender
from ongrid_skills.governance.policy import signatures_for
from ongrid_skills.packs.keys import SigningKey, TrustedKeys
from ongrid_skills.settings import Settings
from ongrid_skills.skills.model import SCOPE_HOST, Skill
from ongrid_skills.skills.registry import RegistryHolder

LOG = logging.getLogger("ongrid_skills.worker")
FETCH_SECONDS = 5.0
ACK_WAIT_SECONDS = 30.0


@dataclass
class Worker:
    """One host's worker: its identity, its registry, and what it runs."""

    settings: Settings
    holder: RegistryHolder
    trusted: TrustedKeys
    runner: Runner
    ledger: Ledger
    key: SigningKey  # this worker's own: it signs the inventory
    #: The credentials of this host (its own data dir's store; SPEC §18): never the manager's.
    credentials: Grants | None = None
    host: str = field(default_factory=socket.gethostname)
    labels: dict[str, str] = field(default_factory=dict)
    instance: str = field(default_factory=lambda: uuid.uuid4().hex)
    refused: int = 0
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _nc: Client | None = None
    _kv: KeyValue | None = None
    _jsctx: Any = None
    _cut_off_at: float | None = None
    _started_at: float = field(default_factory=time.time)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _announce_now: asyncio.Event = field(default_factory=asyncio.Event)
    _refetch: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.names = bus.Names(self.settings.fleet_prefix)
        self.ttl = float(self.settings.fleet_ttl_seconds)
        self.slots = asyncio.Semaphore(self.settings.max_concurrent_executions)
        self.reach = Reach.from_settings(self.settings)
        self.version = package_version("ongrid-skills")

    # ---- life ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Connect, announce, take calls until :meth:`stop`; then leave cleanly."""
        for call_id, skill in self.ledger.interrupt_unfinished():
            LOG.warning(
                "call %s (%s) was running when this worker stopped: not run again", call_id, skill
            )
        nc = self._nc = await bus.connect(
            self.settings,
            f"ongrid-skills worker {self.host}",
            disconnected=self._disconnected,
            reconnected=self._reconnected,
            ttl=self.ttl,
            inbox=self.names.worker_inbox(self.host),
        )
        js = nc.jetstream()
        self._kv = await bus.ensure(js, self.names, self.ttl)
        psub = await js.pull_subscribe(
            self.names.call_subject(self.host),
            durable=self.names.worker_consumer(self.host),
            stream=self.names.calls_stream,
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT_SECONDS),
        )
        await self._announce()
        hosted_names = [r["name"] for r in self._records()]
        LOG.info(
            "worker %s (instance %s): %d host skill(s) announced on %s: %s",
            self.host, self.instance, len(hosted_names), self.names.hosts_bucket,
            ", ".join(hosted_names) or "none",
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        beat = loop.create_task(self._heartbeat())
        stopping = loop.create_task(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                # A stop ends the wait for a message at once (an unacknowledged message goes
                # to the next worker of this host); it never interrupts a message being taken.
                # After a reconnection the pull request in flight is lost with the old
                # connection: it is replaced at once, not left to time out.
                self._refetch.clear()
                fetch = loop.create_task(psub.fetch(1, timeout=FETCH_SECONDS))
                refetch = loop.create_task(self._refetch.wait())
                either = {fetch, stopping, refetch}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                refetch.cancel()
                if not fetch.done():
                    fetch.cancel()
                    continue
                try:
                    messages = fetch.result()
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                except Exception as exc:  # the bus is away: wait for the reconnection
                    LOG.debug("fetch failed: %s", exc)
                    await asyncio.sleep(0.2)
                    continue
                for message in messages:
                    try:
                        await self.take(message)
                    except Exception:  # a bug must not stop the worker: log, go on
                        LOG.exception("worker %s: a message could not be handled", self.host)
        finally:
            beat.cancel()
            stopping.cancel()
            await self._leave()

    def stop(self) -> None:
        self._stopping.set()

    def reload(self) -> None:
        """Reload this host's skills and announce them at once."""
        try:
            self.holder.reload()
        except Exception:
            LOG.exception("reload failed; the previous skills stay announced")
            return
        self._announce_now.set()

    async def _leave(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(BaseException):
                await task
        if self._kv is not None:
            with contextlib.suppress(Exception):
                await self._kv.delete(self.host)
        if self._nc is not None:  # the senders have flushed: nothing is left to drain
            with contextlib.suppress(Exception):
                await self._nc.close()
        LOG.info("worker %s stopped", self.host)

    async def _disconnected(self) -> None:
        if self._stopping.is_set():
            return
        self._cut_off_at = time.monotonic()
        LOG.warning("worker %s: disconnected from NATS; reconnecting", self.host)

    async def _reconnected(self) -> None:
        self._cut_off_at = None
        LOG.warning("worker %s: reconnected to NATS", self.host)
        self._announce_now.set()
        self._refetch.set()

    # ---- inventory -------------------------------------------------------------------------
    def _records(self) -> list[dict[str, Any]]:
        records = []
        for skill in hosted(self.holder.current.skills.values()):
            names = self._bound(skill)
            if names is not None:  # a skill with an unbound slot is not offered from this host
                records.append(record_of(skill, names))
        return records

    def _bound(self, skill: Skill) -> dict[str, str] | None:
        """Slot -> the credential this host binds to it; None while a slot is unbound (or no
        credential store is open for a skill that needs one)."""
        if not skill.credentials:
            return {}
        if self.credentials is None:
            return None
        bound = self.credentials.names(skill)
        names = {slot: name for slot, name in bound.items() if name}
        return names if len(names) == len(bound) else None

    async def _announce(self) -> None:
        records = self._records()
        entry = {
            "host": self.host,
            "instance": self.instance,
            "pid": os.getpid(),
            "version": self.version,
            "labels": self.labels,
            "ttl": self.ttl,
            "started_at": self._started_at,
            "heartbeat_at": time.time(),
            "running": len(self.tasks),
            "skills_digest": skills_digest(records),
            "skills": records,
        }
        assert self._kv is not None
        inventory = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()
        await self._kv.put(self.host, seal(self.key, inventory))

    async def _heartbeat(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._announce_now.wait(), self.ttl / 3)
            self._announce_now.clear()
            self._interrupt_if_cut_off()
            try:
                await self._announce()
            except Exception as exc:  # the bus is away: the next beat tries again
                LOG.debug("heartbeat failed: %s", exc)
            with contextlib.suppress(Exception):
                self.ledger.prune(time.time())

    def _interrupt_if_cut_off(self) -> None:
        """Cut off for longer than the TTL: the managers have recorded the running calls
        interrupted; stop them here too rather than let them act unobserved."""
        if self._cut_off_at is None or time.monotonic() - self._cut_off_at <= self.ttl:
            return
        for call_id, task in list(self.tasks.items()):
            LOG.warning("call %s: cut off from the bus longer than the TTL; stopped", call_id)
            task.cancel()

    # ---- calls -----------------------------------------------------------------------------
    async def take(self, message: Msg) -> None:
        """Check one message; run it, cancel what it names, or refuse it (always acked)."""
        call: Call | None = None
        try:
            call = verify(message.data, message.headers, self.trusted)
            if call.kind == "cancel":
                check(call, self.host, time.time())
                await _ack(message)
                self._cancel(call)
                return
            why = self.ledger.seen(call)
            if why is not None:
                raise Refused("replayed", why)
            try:
                check(call, self.host, time.time())
            except Refused as refusal:
                self._reply_refusal(call, refusal)
                raise
            why = self.ledger.take(call, time.time())
            if why is not None:
                raise Refused("replayed", why)
        except Refused as refusal:
            self.refused += 1
            shown = call.id if call is not None else "(unsigned or forged)"
            LOG.warning(
                "worker %s refused call %s on %s: %s: %s",
                self.host, shown, message.subject, refusal.code, refusal.reason,
            )  # fmt: skip
            await _ack(message)
            return
        # Taken (committed): a redelivery now finds the row. The call starts first — its task
        # runs up to its process's spawn before this one goes on — then the message is
        # acknowledged and the next one asked for.
        batched = (message.headers or {}).get(BATCHES_HEADER) == "1"
        task = asyncio.get_running_loop().create_task(self._run(call, batched))
        self.tasks[call.id] = task
        task.add_done_callback(functools.partial(self._done, call.id))
        await asyncio.sleep(0)
        await _ack(message)

    def _done(self, call_id: str, _task: asyncio.Task[None]) -> None:
        self.tasks.pop(call_id, None)

    def _cancel(self, call: Call) -> None:
        task = self.tasks.get(call.id)
        if task is not None:
            LOG.info("call %s: cancelled by the manager", call.id)
            task.cancel()

    def _reply_refusal(self, call: Call, refusal: Refused) -> None:
        """A genuine call refused before it was taken: tell its manager (it waits for it)."""
        sender = Sender(self._js(), f"{call.reply}.{call.id}", call.id)
        execution = Execution(skill=call.skill, args=call.args, id=call.id)
        execution.status = Status.FAILED
        execution.error = ErrorInfo(f"call_{refusal.code}", refusal.reason)
        execution.finished_at = time.time()
        sender.finish(execution)
        asyncio.get_running_loop().create_task(sender.close())

    def _js(self) -> Any:
        """One JetStream context for every call's sender: its asynchronous publications
        share one reply subscription (a context per call would leave one behind each)."""
        assert self._nc is not None
        if self._jsctx is None:
            self._jsctx = self._nc.jetstream()
        return self._jsctx

    async def _run(self, call: Call, batched: bool) -> None:
        sender = Sender(self._js(), f"{call.reply}.{call.id}", call.id, batched=batched)
        sender.send("accepted", {"host": self.host, "instance": self.instance, "pid": os.getpid()})
        execution = Execution(skill=call.skill, args=call.args, id=call.id)
        try:
            if not await self._execute(call, execution, sender):  # refused: no run, no events
                reason = execution.error.message if execution.error else None
                sender.event(Event("status", {"status": execution.status.value, "reason": reason}))
        except asyncio.CancelledError:
            execution.status = Status.CANCELLED
            execution.error = ErrorInfo("cancelled", "the call was cancelled")
            if self._stopping.is_set() or self._cut_off_at is not None:
                execution.status = Status.INTERRUPTED
                execution.error = ErrorInfo("interrupted", f"worker {self.host} stopped it")
            execution.finished_at = time.time()
            sender.event(Event("status", {"status": execution.status.value}))
        finally:
            sender.finish(execution)  # the manager waits for it, not for the ledger
            try:
                await asyncio.shield(sender.close())
            finally:
                self._finished(call, execution)

    def _finished(self, call: Call, execution: Execution) -> None:
        """The ledger's record of how a call ended, once its outcome is out."""
        try:
            self.ledger.finish(call.id, execution.status.value)
        except Exception:  # the call stays "taken": it is never run again either way
            LOG.exception("call %s: its end could not be written to the ledger", call.id)

    async def _execute(self, call: Call, execution: Execution, sender: Sender) -> bool:
        """Run the call if this host's skill is the one signed for; False when refused."""
        registry = self.holder.current
        skill = registry.skills.get(call.skill)
        if skill is None or skill.scope != SCOPE_HOST or not skill.available:
            _fail(execution, "unknown_skill", f"host {self.host} has no host skill {call.skill}")
            return False
        names = self._bound(skill)
        if names is None:
            _fail(execution, "credential_missing", f"{call.skill} on host {self.host} has a "
                  "credential slot with nothing bound: not run")  # fmt: skip
            return False
        if names != call.credentials:
            _fail(execution, "credentials_changed", f"{call.skill} on host {self.host} binds "
                  "other credentials than the call was admitted with: not run")  # fmt: skip
            return False
        if definition_hash(skill, names) != call.definition_hash:
            _fail(
                execution,
                "definition_changed",
                f"{call.skill} on host {self.host} is not the definition the manager sent "
                "(edited or redeployed since it was announced): not run",
            )
            return False
        if call.preview:  # its declared preview, never the real call (SPEC §20)
            dry = dry_run(skill, call, execution, self.host)
            if dry is None:
                return False
            skill = dry
        needs = signatures_for(skill.skill_class, skill.confirmation_required)
        if call.skill_class != skill.skill_class.value or call.signatures != needs:
            _fail(
                execution,
                "definition_changed",
                f"{call.skill} on host {self.host} is {skill.skill_class.value} and needs {needs} "
                f"signature(s); the manager sent it as {call.skill_class[:32]} with "
                f"{call.signatures}: not run",
            )
            return False
        violations = skill.validate(execution.args)
        if violations:
            execution.error = ErrorInfo(
                "invalid_args", "the args do not match the skill's schema on this host",
                [v.to_dict() for v in violations],
            )  # fmt: skip
            execution.status, execution.finished_at = Status.INVALID_ARGS, time.time()
            return False
        async with self.slots:
            if skill.credentials:  # the names signed for, checked again once the call may run
                execution.credentials = dict(call.credentials)
            grant = await grant_for(skill, execution, self.credentials)  # read now, on this host
            if skill.credentials and grant is None:
                return False
            try:
                await run_skill(
                    skill, execution, sender.event, self.runner,
                    registry=registry, reach=self.reach, grant=grant,
                )  # fmt: skip
            finally:
                if self.credentials is not None:
                    self.credentials.release(grant)
        return True


def _fail(execution: Execution, code: str, message: str) -> None:
    execution.status = Status.FAILED
    execution.error = ErrorInfo(code, message)
    execution.finished_at = time.time()


async def _ack(message: Msg) -> None:
    """Acknowledge (without waiting for the server's word: a lost acknowledgement only means a
    redelivery, which the ledger refuses)."""
    with contextlib.suppress(Exception):
        await message.ack()
