"""Admitted calls, run: the manager's one running path, from a slot to the committed outcome.

A call the gate admitted (its row and audit entry already written) is counted as waiting at once,
waits for one of ``max_concurrent_executions`` slots, runs — here through the runner or an
in-process built-in, or on its host through the fleet — and ends with its outcome recorded in one
deferred write, group-committed with the outcomes of the calls that end meanwhile. Events are
kept live in the hub and persisted in batches. A cancelled call (or one cut by a shutdown) ends
``cancelled`` (``interrupted``) and is recorded like any other.

:meth:`Calls.prepare` builds what the runner receives for one call (:class:`Launch`): the one
place where per-call preparation plugs in. A request's preview (SPEC §20) goes the same way
(:meth:`Calls.preview`): a safe call of the skill's dry run, prepared and launched like the real
call (same credentials, same confinement), with its own timeout, never recorded as a call; a
host skill's preview goes to the request's host as a safe call marked as its preview, and that
host runs the preview it announced.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from ongrid_skills.builtins.base import Reach, ToolPorts
from ongrid_skills.errors import Conflict, StorageFull
from ongrid_skills.execution.grant import Grants
from ongrid_skills.execution.pipeline import grant_for, run_skill
from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Execution, Status
from ongrid_skills.execution.runner import Runner
from ongrid_skills.execution.timeline import EventHub, Timeline
from ongrid_skills.governance.principal import Principal
from ongrid_skills.metrics import Metrics
from ongrid_skills.settings import Settings
from ongrid_skills.skills.model import HOST_ARG, Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.store import Store
from ongrid_skills.types import SkillClass

if TYPE_CHECKING:  # the NATS client is imported only when a fleet is configured
    from ongrid_skills.fleet.dispatch import Fleet

LOG = logging.getLogger("ongrid_skills.manager")


@dataclass(frozen=True)
class Launch:
    """What the runner receives for one admitted call, built by :meth:`Calls.prepare` when the
    call has its slot."""

    skill: Skill
    execution: Execution
    #: The registry the call runs against (one snapshot), and its persona there.
    registry: Registry
    persona: Persona | None
    #: What built-ins may reach (files, network).
    reach: Reach
    #: The fleet that runs a host skill on its host; None: it runs in this process.
    fleet: Fleet | None


class Calls:
    """The calls admitted to run in this process: their slots, counters, tasks and outcomes."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        hub: EventHub,
        metrics: Metrics,
        *,
        runner: Runner,
        reach: Reach,
        registry: Callable[[], Registry],
        fleet: Callable[[], Fleet | None],
        clock: Callable[[], float],
        replica_id: str | None = None,
        grants: Grants | None = None,
        ports: ToolPorts | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.hub = hub
        self.metrics = metrics
        self.runner = runner
        self.reach = reach
        #: The manager's registry and fleet, read at each call (reloads, a fleet attached late).
        self.registry = registry
        self.fleet = fleet
        self.clock = clock
        #: On a shared database, the lease the rows of these calls name; None on the embedded one.
        self.replica_id = replica_id
        #: Where a skill with credential slots gets them (the manager's credential store).
        self.grants = grants
        #: What the manager lends built-ins (the pack service of install_skill).
        self.ports = ports if ports is not None else ToolPorts()
        self.slots = asyncio.Semaphore(settings.max_concurrent_executions)
        self.running = 0
        self.waiting = 0
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._entered: set[str] = set()  # tasks whose coroutine has started
        #: Set when the manager shuts down: a call cut then ends interrupted, not cancelled.
        self.closing = False
        #: The previews of requests running in this process (cancelled when it stops).
        self.previewing: set[asyncio.Task[None]] = set()

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

    def prepare(self, execution: Execution, skill: Skill) -> Launch:
        """What the runner receives for ``execution``, built once it has its slot."""
        registry = self.registry()
        persona = registry.personas.get(execution.persona or "")
        fleet = self.fleet() if skill.placement is not None else None
        return Launch(skill, execution, registry, persona, self.reach, fleet)

    def preview(
        self, execution: Execution, skill: Skill, done: Callable[[Execution], object]
    ) -> asyncio.Task[None]:
        """Run the preview of the call ``execution`` waits to have approved, now, in the
        background; ``done`` is given its outcome (an Execution never stored: a preview is no
        call). It runs as a safe call of ``skill``'s dry run (its args merged over the
        caller's, or its preview entry) with the call's credentials, through :meth:`prepare`
        and the launch of every call, in a slot, within the preview's own timeout."""
        task = asyncio.get_running_loop().create_task(self._preview(execution, skill, done))
        self.previewing.add(task)
        task.add_done_callback(self.previewing.discard)
        return task

    async def _preview(
        self, execution: Execution, skill: Skill, done: Callable[[Execution], object]
    ) -> None:
        spec = skill.preview
        assert spec is not None, f"no preview of {skill.name}"
        dry = dataclasses.replace(
            skill,
            skill_class=SkillClass.SAFE,
            confirmation_required=False,
            target=spec.target or skill.target,
            timeout_seconds=spec.timeout_seconds,
            preview=None,
        )
        run = Execution(
            skill=skill.name,
            args=spec.merged(execution.args),
            persona=execution.persona,
            requested_by=execution.requested_by,
        )
        if skill.placement is not None and isinstance(run.args, dict):  # on the request's host
            run.args[HOST_ARG] = execution.args.get(HOST_ARG)
        run.credentials = execution.credentials  # the credentials the request binds
        violations = dry.validate(run.args)
        try:
            if violations:
                run.status = Status.INVALID_ARGS
                listed = "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:5])
                run.error = ErrorInfo("invalid_args", f"the preview's args are invalid: {listed}")
            elif dry.target is not None and dry.target.changed_on_disk():
                run.status = Status.FAILED  # the request binds the file as loaded: not run
                run.error = ErrorInfo("skill_changed", f"{dry.target.entry} changed since load")
            else:
                async with self.slots:
                    launch = self.prepare(run, dry)
                    if launch.fleet is not None:  # its host runs the preview it announced
                        await launch.fleet.run(dry, run, lambda _event: None, preview=True)
                    else:
                        await self._launch(launch, lambda _event: None)
        except asyncio.CancelledError:
            self._cancelled(run, lambda _event: None, "the preview was cancelled")
            raise
        finally:
            try:
                done(run)
            except Exception:
                LOG.exception("the preview of %s could not be recorded", execution.id)

    async def _launch(self, launch: Launch, emit: EventSink) -> None:
        if launch.fleet is not None:
            await launch.fleet.run(launch.skill, launch.execution, emit)
            return
        # Read at call time (a rotation takes effect on the next call); a credential that cannot
        # be had now fails the call before anything runs.
        grant = await grant_for(launch.skill, launch.execution, self.grants)
        if launch.skill.credentials and grant is None:
            emit(Event("status", {"status": launch.execution.status.value}))
            return
        try:
            await run_skill(
                launch.skill,
                launch.execution,
                emit,
                self.runner,
                registry=launch.registry,
                persona=launch.persona,
                reach=launch.reach,
                grant=grant,
                ports=self.ports,
            )
        finally:
            if self.grants is not None:
                self.grants.release(grant)

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
                    await self._launch(self.prepare(execution, skill), emit)
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

    # ---- control -------------------------------------------------------------------------
    async def cancel(self, execution: Execution, principal: Principal) -> None:
        """Cancel ``execution`` if it runs here (the caller checked who may); wait for its end."""
        execution_id = execution.id
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

    async def stop(self) -> None:
        """Cancel every call still running and wait for each to be recorded (with ``closing``
        set, they end interrupted)."""
        for task in [*self.tasks.values(), *self.previewing]:
            task.cancel()
        for task in [*self.tasks.values(), *self.previewing]:
            with contextlib.suppress(BaseException):
                await task
