"""The manager: the one ``submit()`` path every door uses, with the store, approvals and limits.

resolve skill → idempotency → gate (class × persona mode × role × confirm) → deny, approval
request, or run. Rows are written before the spawn, outcomes right after in groups (group
commit: the caller does not wait for them); events are kept live in the hub and persisted in
batches; every request, decision and result lands in the audit chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from ongrid_skills.approvals.desk import ApprovalDesk
from ongrid_skills.builtins.base import Reach
from ongrid_skills.errors import (
    Busy,
    Conflict,
    Denied,
    Forbidden,
    InvalidArgs,
    NotFound,
    SkillError,
    StorageFull,
)
from ongrid_skills.execution.digests import args_digest
from ongrid_skills.execution.pipeline import check_runnable, check_transportable, run_skill
from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Execution, Status
from ongrid_skills.execution.runner import Runner, SubprocessRunner
from ongrid_skills.execution.supervision import groups_dir_of, kill_left_behind
from ongrid_skills.execution.timeline import EventHub, Timeline
from ongrid_skills.fleet import follow
from ongrid_skills.fleet.replica import Replica, interrupt
from ongrid_skills.governance.gate import admit, may_cancel
from ongrid_skills.governance.principal import Principal
from ongrid_skills.metrics import Metrics
from ongrid_skills.settings import Settings
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry, RegistryHolder
from ongrid_skills.store import Store

if TYPE_CHECKING:  # the NATS client is imported only when a fleet is configured
    from ongrid_skills.fleet.dispatch import Fleet

LOG = logging.getLogger("ongrid_skills.manager")


def request_digest(name: str, args: Any, persona: str | None) -> str:
    """What an Idempotency-Key is bound to (besides its principal): the skill, the exact args
    and the persona. A key reused with any of them different is a conflict, never a replay."""
    return args_digest({"skill": name, "args": args, "persona": persona})


class Manager:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        holder: RegistryHolder,
        *,
        runner: Runner | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.holder = holder
        self.groups_dir = groups_dir_of(settings.data_dir)
        self.runner: Runner = runner or SubprocessRunner(groups_dir=self.groups_dir)
        self.metrics = metrics or Metrics()
        self.clock = clock
        #: What built-ins may reach (files, network); a malformed setting fails here, at start.
        self.reach = Reach.from_settings(settings)
        self.hub = EventHub()
        self.slots = asyncio.Semaphore(settings.max_concurrent_executions)
        self.running = 0
        self.waiting = 0
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._entered: set[str] = set()  # tasks whose coroutine has started
        #: On a shared database, this process's lease; the rows of its calls name its id.
        ttl = settings.replica_lease_ttl_seconds
        self.replica = Replica(store, ttl=ttl) if settings.database_url else None
        self.replica_id = self.replica.id if self.replica is not None else None
        self.desk = ApprovalDesk(
            store,
            self.hub,
            self.metrics,
            self,
            ttl_seconds=settings.approval_ttl_seconds,
            clock=lambda: self.clock(),  # noqa: PLW0108 - read at each use: a replaced clock is seen
            replica_id=self.replica_id,
        )
        self.closing = False
        #: Set by the runtime: whether this process owns the embedded data dir (and recovers).
        self.owns_data_dir = False
        #: Called with the new registry after every reload (MCP list_changed, UI refresh…),
        #: and after the hosts of the fleet changed what it offers.
        self.reload_listeners: list[Callable[[Registry], None]] = []
        #: Edge workers (set by the runtime with ONGRID_NATS_URL): host skills run there.
        self.fleet: Fleet | None = None

    @property
    def registry(self) -> Registry:
        """The skills of every door: this manager's own, merged with the fleet's host skills."""
        local = self.holder.current
        return self.fleet.hosts.merge(local) if self.fleet is not None else local

    def attach(self, fleet: Fleet) -> None:
        """Offer the host skills of ``fleet`` and run them there."""
        self.fleet = fleet
        fleet.on_change = lambda: self._tell_listeners(self.registry)

    # ---- start-up ---------------------------------------------------------------------------
    async def recover(self) -> None:
        """Calls left running by a dead manager are killed and their rows become interrupted;
        approved calls run. On a shared database, only the calls of replicas whose lease
        expired are interrupted, and this replica's lease and heartbeat start first.

        Called by :func:`ongrid_skills.runtime.open_manager` on the manager that owns the data
        dir only (see :class:`ongrid_skills.runtime.DataDirLock`)."""
        # Normally the dead manager's sentinel has done this already; not if it died too.
        killed = await asyncio.to_thread(kill_left_behind, self.groups_dir)
        if killed:
            LOG.warning("killed %d call(s) a dead manager had left running", killed)
        if self.replica is not None:
            self.replica.on_interrupted = self._interrupted
            self.replica.join()
            self._interrupted(self.replica.sweep())
        else:
            left = self.store.executions.unfinished()
            with self.store.tx() as conn:
                reason = "the manager stopped while this call ran"
                self._interrupted(interrupt(self.store, conn, left, reason, self.clock()))
        await self.desk.recover()
        if self.replica is not None:
            self.replica.start()

    def _interrupted(self, executions: list[Execution]) -> None:
        for execution in executions:
            self.metrics.finished(execution.skill, execution.status.value, None)

    # ---- the one path ------------------------------------------------------------------------
    async def submit(
        self,
        name: str,
        args: Any,
        *,
        principal: Principal,
        persona: str | None = None,
        confirm: bool = False,
        wait: bool = True,
        idempotency_key: str | None = None,
        on_event: EventSink | None = None,
    ) -> Execution:
        registry = self.registry
        try:
            skill = registry.get(name)
            check_runnable(skill)
            check_transportable(name, args)
            who = registry.persona(persona) if persona else None
        except SkillError as exc:
            self._audit_refusal(principal, name, persona, exc)
            raise
        key = f"{principal.name}:{idempotency_key}" if idempotency_key else None
        digest = request_digest(name, args, persona)
        if key is not None:
            found = self.store.executions.by_idempotency_key(key)
            if found is not None:
                if found[1] != digest:
                    raise Conflict(
                        "Idempotency-Key reused for another request (skill, args or persona)"
                    )
                return found[0]
        decision = admit(skill, who, role=principal.role, confirmed=confirm and principal.human)
        execution = Execution(skill=name, args=args, persona=persona, requested_by=principal.name)
        if decision.action == "deny":
            self._refuse(execution, skill, Status.DENIED, ErrorInfo("denied", decision.reason))
            raise Denied(decision.reason)
        if skill.placement is not None and self.fleet is not None:  # before the host enum
            problem = self.fleet.host_problem(skill, args)
            if problem is not None:  # host_offline, definition_changed: never sent
                self._refuse(execution, skill, Status.FAILED, problem)
                self.fleet.refused(args, Status.FAILED.value)
                return execution
        violations = skill.validate(args)
        if violations:
            error = InvalidArgs(name, violations)
            details = [v.to_dict() for v in violations]
            info = ErrorInfo("invalid_args", error.message, details)
            self._refuse(execution, skill, Status.INVALID_ARGS, info)
            raise error
        if decision.action == "approve":
            return self.desk.request(
                execution, skill, who, principal, decision.signatures_required, confirm, key, digest
            )
        capacity = self.settings.max_concurrent_executions + self.settings.execution_queue_size
        if self.running + self.waiting >= capacity:
            self.metrics.rejected_busy()
            raise Busy("too many executions running and waiting; retry later")
        with self.store.tx() as conn:
            self.store.executions.insert(
                conn,
                execution,
                definition_hash=skill.definition_hash,
                idempotency_key=key,
                args_hash=digest,
                replica_id=self.replica_id,
            )
            self.store.audit.append(
                conn,
                principal.name,
                "execution.started",
                execution.id,
                {"skill": name, "args": args, "persona": persona, "class": skill.skill_class.value},
            )
        task = self.start(execution, skill, on_event)
        if wait:
            await asyncio.shield(task)
        return execution

    def _refuse(self, execution: Execution, skill: Skill, status: Status, error: ErrorInfo) -> None:
        execution.status = status
        execution.error = error
        execution.finished_at = self.clock()
        with self.store.tx() as conn:
            self.store.executions.insert(conn, execution, definition_hash=skill.definition_hash)
            self.store.audit.append(
                conn,
                execution.requested_by or "unknown",
                f"execution.{status.value}",
                execution.id,
                {"skill": skill.name, "args": execution.args, "reason": error.message},
            )
        self.metrics.finished(skill.name, status.value, None)

    def _audit_refusal(
        self, principal: Principal, name: str, persona: str | None, exc: SkillError
    ) -> None:
        with self.store.tx() as conn:
            self.store.audit.append(
                conn,
                principal.name,
                "execution.refused",
                None,
                {"skill": name[:200], "persona": persona, "code": exc.code, "reason": exc.message},
            )

    # ---- running -----------------------------------------------------------------------------
    def start(
        self, execution: Execution, skill: Skill, on_event: EventSink | None = None
    ) -> asyncio.Task[None]:
        timeline = self.hub.open(execution.id)
        self.waiting += 1  # counted now, synchronously: admission control sees it at once
        self.metrics.queued.set(self.waiting)
        task = asyncio.get_running_loop().create_task(
            self._run(execution, skill, timeline, on_event)
        )
        self.tasks[execution.id] = task
        entered = self._entered

        def done(_task: asyncio.Task[None]) -> None:
            self.tasks.pop(execution.id, None)
            if execution.id not in entered:  # cancelled before its first step: settle it here
                self.waiting -= 1
                self._cancelled(execution, timeline.append, "the call was cancelled")
                self._finish(execution, skill, timeline)
            entered.discard(execution.id)

        task.add_done_callback(done)
        return task

    async def _run(
        self,
        execution: Execution,
        skill: Skill,
        timeline: Timeline,
        on_event: EventSink | None,
    ) -> None:
        self._entered.add(execution.id)
        flusher: asyncio.TimerHandle | None = None
        loop = asyncio.get_running_loop()

        def flush() -> None:
            nonlocal flusher
            flusher = None
            try:
                with timeline.flushing() as pending:
                    if pending:
                        with self.store.tx() as conn:
                            self.store.executions.add_events(conn, execution.id, pending)
            except StorageFull:
                LOG.warning("events of %s kept in memory: the store is full", execution.id)

        def emit(event: Event) -> None:
            nonlocal flusher
            timeline.append(event)
            if on_event is not None:
                with contextlib.suppress(Exception):
                    on_event(event)
            if flusher is None:
                flusher = loop.call_later(self.settings.event_flush_ms / 1000, flush)

        try:
            async with self.slots:
                self.waiting -= 1
                self.metrics.queued.set(self.waiting)
                self.running += 1
                self.metrics.running.inc()
                try:
                    registry = self.registry
                    persona = registry.personas.get(execution.persona or "")
                    if skill.placement is not None and self.fleet is not None:
                        await self.fleet.run(skill, execution, emit)
                    else:
                        await run_skill(
                            skill,
                            execution,
                            emit,
                            self.runner,
                            registry=registry,
                            persona=persona,
                            reach=self.reach,
                        )
                except asyncio.CancelledError:
                    self._cancelled(execution, emit, "the call was cancelled")
                finally:
                    self.running -= 1
                    self.metrics.running.dec()
        except asyncio.CancelledError:  # cancelled while waiting for a slot
            self.waiting -= 1
            self._cancelled(execution, emit, "the call was cancelled before it started")
        finally:
            if flusher is not None:
                flusher.cancel()
            committed = self._finish(execution, skill, timeline)
        # The caller gets its outcome once it is committed (shared with other calls' outcomes:
        # group commit), so what a client was told is what the store says after a crash.
        if not committed.done():  # committed here already when the writer was idle
            with contextlib.suppress(asyncio.CancelledError):  # a cancel has nothing to stop
                await asyncio.shield(asyncio.wrap_future(committed))

    def _cancelled(
        self, execution: Execution, emit: Callable[[Event], object], reason: str
    ) -> None:
        if self.closing:
            execution.status = Status.INTERRUPTED
            execution.error = ErrorInfo("interrupted", "the manager shut down while this call ran")
        else:
            execution.status = Status.CANCELLED
            execution.error = ErrorInfo("cancelled", reason)
        execution.finished_at = self.clock()
        emit(Event("status", {"status": execution.status.value}))

    def _finish(self, execution: Execution, skill: Skill, timeline: Timeline) -> Future[None]:
        """Record the outcome (row, remaining events, audit entry) in one deferred write, group-
        committed with the outcomes of the calls that end meanwhile; the future settles once it
        is committed. On a full store the write stays queued and is retried (the audit chain is
        untouched meanwhile: the failed transaction rolled back whole), and the future settles
        at once: a call that ran is never lost, and nobody waits on a full disk."""
        # Nothing is appended to a finished call's timeline: what is not stored yet is final.
        start = timeline.flushed
        pending = timeline.events[start:]

        def write(conn: Connection) -> None:
            self._record_finish(conn, execution, skill, pending)
            timeline.flushed = max(timeline.flushed, start + len(pending))

        try:
            committed = self.store.defer(write)
        except BaseException:  # the store is closed: the followers must not wait for ever
            self.hub.close(execution.id)
            raise
        self.hub.close_when(execution.id, committed)  # followers learn the end once committed
        self.metrics.finished(skill.name, execution.status.value, execution.duration_ms)
        return committed

    def _record_finish(
        self,
        conn: Connection,
        execution: Execution,
        skill: Skill,
        pending: list[tuple[int, Event]],
    ) -> None:
        held = self.store.executions.update(conn, execution, held_by=self.replica_id)
        if not held and self.replica_id is not None:
            # Only on a shared database: this replica's lease expired (it stalled) and
            # another replica recorded the call interrupted. That record stands.
            LOG.error("outcome of %s refused: its row was ended elsewhere", execution.id)
            self.store.audit.append(
                conn,
                "manager",
                "execution.outcome_refused",
                execution.id,
                {"skill": skill.name, "status": execution.status.value},
            )
            return
        self.store.executions.add_events(conn, execution.id, pending)
        self.store.audit.append(
            conn,
            "manager",
            "execution.finished",
            execution.id,
            {
                "skill": skill.name,
                "status": execution.status.value,
                "exit_code": execution.exit_code,
                "error": execution.error.code if execution.error else None,
                "orphans_killed": execution.orphans_killed,
            },
        )

    # ---- queries and control -------------------------------------------------------------
    def get(self, execution_id: str) -> Execution:
        execution = self.store.executions.get(execution_id)
        if execution is None:
            raise NotFound(f"unknown execution {execution_id!r}")
        return execution

    def follow(self, execution_id: str, after: int = 0) -> AsyncIterator[tuple[int, Event]]:
        """The call's events after number ``after`` until it ends, wherever it runs (this
        process, another replica, another process on the data dir): see ``fleet.follow``."""
        return follow.follow(self.hub, self.store.executions, execution_id, after)

    async def cancel(self, execution_id: str, principal: Principal) -> Execution:
        execution = self.get(execution_id)
        if not may_cancel(principal, execution.requested_by):
            raise Forbidden("only the requester or an operator may cancel this execution")
        if execution.status is Status.PENDING_APPROVAL and execution.approval_id:
            return self.desk.cancel(execution, principal)
        task = self.tasks.get(execution_id)
        if task is None and not execution.status.final:
            raise Conflict(
                f"execution {execution_id} runs in another manager process: cancel it there"
            )
        if execution.status.final or task is None:
            raise Conflict(f"execution {execution_id} is {execution.status.value}, not running")
        with self.store.tx() as conn:
            self.store.audit.append(
                conn, principal.name, "execution.cancel_requested", execution_id
            )
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), timeout=10)
        return self.get(execution_id)

    def persona_for(self, name: str | None) -> Persona | None:
        return self.registry.persona(name) if name else None

    async def reload(self, actor: str) -> Registry:
        before = self.registry
        fresh = await asyncio.to_thread(self.holder.reload)
        added = sorted(set(fresh.skills) - set(before.skills))
        removed = sorted(set(before.skills) - set(fresh.skills))
        changed = sorted(
            n
            for n in set(fresh.skills) & set(before.skills)
            if fresh.skills[n].load_hash != before.skills[n].load_hash
        )
        with self.store.tx() as conn:
            self.store.audit.append(
                conn,
                actor,
                "registry.reloaded",
                None,
                {"skills": len(fresh), "added": added, "removed": removed, "changed": changed},
            )
        self.metrics.loaded(fresh)
        self._tell_listeners(self.registry)
        return fresh

    def _tell_listeners(self, registry: Registry) -> None:
        for listener in list(self.reload_listeners):
            try:
                listener(registry)
            except Exception:
                LOG.exception("a reload listener failed")

    async def close(self) -> None:
        self.closing = True
        self.desk.stop()
        if self.replica is not None:
            await self.replica.stop()
        for task in list(self.tasks.values()):
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(BaseException):
                await task
        if self.replica is not None:  # after the calls above were recorded under its lease
            with contextlib.suppress(Exception):
                self.replica.leave()
        if isinstance(self.runner, SubprocessRunner):
            self.runner.close()
