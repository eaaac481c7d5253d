"""The manager: the one ``submit()`` path every door uses, with the store, approvals and limits.

resolve skill → idempotency → gate (class × persona mode × role × confirm) → deny, approval
request, or run. Rows are written before the spawn; an admitted call runs through
:mod:`ongrid_skills.calls` (slots, events, outcomes committed in groups), an approval request
through the desk of :mod:`ongrid_skills.approvals`; every request, decision and result lands in
the audit chain. Start-up recovery: :mod:`ongrid_skills.recovery`, then the desk's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ongrid_skills.approvals.desk import ApprovalDesk
from ongrid_skills.approvals.previews import previewing
from ongrid_skills.builtins.base import Reach, ToolPorts, request_hook
from ongrid_skills.calls import Calls
from ongrid_skills.credentials.service import Credentials, open_credentials
from ongrid_skills.errors import (
    Busy,
    Conflict,
    CredentialMissing,
    Denied,
    Forbidden,
    InvalidArgs,
    NotFound,
    SkillError,
)
from ongrid_skills.execution.confine import SandboxPolicy
from ongrid_skills.execution.digests import args_digest
from ongrid_skills.execution.pipeline import check_runnable, check_transportable
from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Execution, Status
from ongrid_skills.execution.runner import Runner, SubprocessRunner
from ongrid_skills.execution.supervision import groups_dir_of
from ongrid_skills.execution.timeline import EventHub
from ongrid_skills.fleet import follow
from ongrid_skills.fleet.notices import Notices
from ongrid_skills.fleet.replica import Replica
from ongrid_skills.governance.gate import admit, may_cancel
from ongrid_skills.governance.principal import Principal
from ongrid_skills.metrics import Metrics
from ongrid_skills.notify.events import Notice
from ongrid_skills.recovery import end_left_behind
from ongrid_skills.settings import Settings
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry, RegistryHolder
from ongrid_skills.skills.stored_personas import StoredPersonas
from ongrid_skills.store import Store
from ongrid_skills.store.credentials import Binding

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
        self.runner: Runner = runner or SubprocessRunner(
            groups_dir=self.groups_dir, sandbox=SandboxPolicy.from_settings(settings)
        )
        self.metrics = metrics or Metrics()
        self.clock = clock
        #: What built-ins may reach (files, network); a malformed setting fails here, at start.
        self.reach = Reach.from_settings(settings)
        self.hub = EventHub()
        #: On a shared database, this process's lease; the rows of its calls name its id.
        ttl = settings.replica_lease_ttl_seconds
        self.replica = Replica(store, ttl=ttl) if settings.database_url else None
        self.replica_id = self.replica.id if self.replica is not None else None
        #: On PostgreSQL, what wakes the followers of calls that run on other replicas.
        self.notices = (
            Notices(store.db.engine.url, self.hub, store.audit.sealer.subkey(b"notices"))
            if store.db.dialect == "postgresql"
            else None
        )
        #: The data dir's credentials: what skills with slots are given (SPEC §18).
        self.credentials: Credentials = open_credentials(settings, store.credentials)
        #: The personas written at run time, merged into the registry (files win a name).
        self.personas = StoredPersonas(store.personas, lambda: self.holder.current)
        #: What built-ins that act on this manager are lent (the runtime sets the pack service).
        self.ports = ToolPorts()
        #: The admitted calls running in this process (slots, counters, outcomes).
        self.calls = Calls(
            settings,
            store,
            self.hub,
            self.metrics,
            runner=self.runner,
            reach=self.reach,
            registry=lambda: self.registry,
            fleet=lambda: self.fleet,
            clock=lambda: self.clock(),  # noqa: PLW0108 - read at each use: a replaced clock is seen
            replica_id=self.replica_id,
            grants=self.credentials,
            ports=self.ports,
        )
        self.desk = ApprovalDesk(
            store,
            self.hub,
            self.metrics,
            self,
            ttl_seconds=settings.approval_ttl_seconds,
            clock=lambda: self.clock(),  # noqa: PLW0108 - read at each use: a replaced clock is seen
            replica_id=self.replica_id,
        )
        #: Set by the runtime: whether this process owns the embedded data dir (and recovers).
        self.owns_data_dir = False
        #: Called with the new registry after every reload (MCP list_changed, UI refresh…),
        #: and after the hosts of the fleet changed what it offers.
        self.reload_listeners: list[Callable[[Registry], None]] = []
        #: Edge workers (set by the runtime with ONGRID_NATS_URL): host skills run there.
        self.fleet: Fleet | None = None
        #: Posts a notice to the approval webhooks' channels (set by the runtime when any).
        self.post_notice: Callable[[Notice], None] | None = None

    @property
    def running(self) -> int:
        """Calls running in this process now."""
        return self.calls.running

    @property
    def waiting(self) -> int:
        """Admitted calls of this process waiting for a slot."""
        return self.calls.waiting

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        """The task of each call running (or waiting) in this process, by execution id."""
        return self.calls.tasks

    @property
    def registry(self) -> Registry:
        """The skills of every door: this manager's own, merged with the fleet's host skills;
        a skill with a credential slot nothing is bound to is unavailable; the stored
        personas merged in."""
        local = self.holder.current
        merged = self.fleet.hosts.merge(local) if self.fleet is not None else local
        return self.personas.overlay(self.credentials.overlay(merged))

    def credential_names(self, skill: Skill) -> dict[str, str | None]:
        """Each slot of ``skill`` → the credential its calls would be given now (names only):
        bound here, or, for a host skill, what its hosts announce they bind."""
        if skill.placement is not None:
            return dict(skill.placement.credentials)
        if not skill.credentials:
            return {}
        return self.credentials.names(skill)

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
        await end_left_behind(
            self.store,
            self.replica,
            self.metrics,
            groups_dir=self.groups_dir,
            clock=self.clock,
        )
        swept = await asyncio.to_thread(self.credentials.sweep)  # a dead manager's call folders
        if swept:
            LOG.info("removed the credential folders of %d process(es) no longer running", swept)
        await self.desk.recover()
        if self.replica is None:  # previews a previous run of this manager left running
            self.desk.previews.abandoned()
        if self.replica is not None:
            self.replica.start()
        if self.notices is not None:
            self.notices.start()

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
        context: dict[str, Any] | None = None,
    ) -> Execution:
        """``context`` (what started the call: a trigger's alert) goes with an approval request."""
        registry = self.registry
        try:
            skill = registry.get(name)
            if skill.credentials and skill.placement is None:  # bindings now, not 2 s ago
                names = self.credential_names(skill)
                registry = self.registry
                skill = registry.get(name)
                unbound = sorted(slot for slot, credential in names.items() if not credential)
                if unbound:
                    raise CredentialMissing(f"{name} needs credential for slot {unbound[0]}")
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
        admitted = self.credential_names(skill)  # the credentials the call is admitted with
        execution.credentials = {k: v for k, v in admitted.items() if v} or None
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
            hook = request_hook(skill.builtin)  # install_skill: fetch, pin, summarise now
            preview = None
            if hook is not None:
                try:
                    prepared = await hook(self.ports, dict(args))
                except SkillError as exc:
                    self._audit_refusal(principal, name, persona, exc)
                    raise
                execution.args, preview = prepared.args, prepared.preview
            # Its dry run starts with the request (SPEC §20), here or on the request's host.
            plan = skill.preview
            if plan is not None:
                preview = {**(preview or {}), "run": previewing(self.clock(), plan.timeout_seconds)}
            requested = self.desk.request(
                execution,
                skill,
                who,
                principal,
                decision.signatures_required,
                confirm,
                key,
                digest,
                preview=preview,
                context=context,
            )
            approval_id = requested.approval_id
            if plan is not None and approval_id is not None:
                attach = self.desk.previews.attach
                self.calls.preview(requested, skill, lambda run: attach(approval_id, run))
            return requested
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
                {
                    "skill": name,
                    "args": args,
                    "persona": persona,
                    "class": skill.skill_class.value,
                    **({"credentials": execution.credentials} if execution.credentials else {}),
                },
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
        """Run an admitted call whose row is written (the desk's approved calls start here)."""
        return self.calls.start(execution, skill, on_event)

    # ---- queries and control -------------------------------------------------------------
    def get(self, execution_id: str) -> Execution:
        execution = self.store.executions.get(execution_id)
        if execution is None:
            raise NotFound(f"unknown execution {execution_id!r}")
        return execution

    def follow(self, execution_id: str, after: int = 0) -> AsyncIterator[tuple[int, Event]]:
        """The call's events after number ``after`` until it ends, wherever it runs (this
        process, another replica, another process on the data dir): see ``fleet.follow``."""
        return follow.follow(
            self.hub, self.store.executions, execution_id, after, notices=self.notices
        )

    async def cancel(self, execution_id: str, principal: Principal) -> Execution:
        execution = self.get(execution_id)
        if not may_cancel(principal, execution.requested_by):
            raise Forbidden("only the requester or an operator may cancel this execution")
        if execution.status is Status.PENDING_APPROVAL and execution.approval_id:
            return self.desk.cancel(execution, principal)
        await self.calls.cancel(execution, principal)
        return self.get(execution_id)

    # ---- credentials ---------------------------------------------------------------------------
    async def bind_credential(
        self, credential: str, slot: str, actor: str, *, skill: str | None, pack: str | None
    ) -> Binding | None:
        """Bind ``credential`` to a slot of ``skill`` (or of ``pack``'s skills); pending
        requests of the skills concerned are void (they were made with other credentials)."""
        found = self.holder.current.get(skill) if skill is not None else None
        previous = await asyncio.to_thread(
            self.credentials.bind, credential, slot, actor, skill=found, pack=pack
        )
        self._credentials_changed()
        return previous

    async def unbind_credential(
        self, slot: str, actor: str, *, skill: str | None, pack: str | None
    ) -> Binding:
        """Leave a slot without a credential: its skills are unavailable, their requests void."""
        previous = await asyncio.to_thread(
            self.credentials.unbind, slot, actor, skill=skill, pack=pack
        )
        self._credentials_changed()
        return previous

    def _credentials_changed(self) -> None:
        registry = self.registry
        for approval in self.store.approvals.with_status("pending"):
            skill = registry.skills.get(approval.skill)
            if skill is not None and skill.credentials:
                with contextlib.suppress(Conflict):  # void: the ledger has closed it
                    self.desk.checks.admissible(approval)
        self._tell_listeners(registry)  # what is offered changed

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

    def tell_listeners(self) -> None:
        """Tell the reload listeners what is offered now (a stored persona changed); from
        the event loop's thread, where they schedule their work."""
        self._tell_listeners(self.registry)

    def _tell_listeners(self, registry: Registry) -> None:
        for listener in list(self.reload_listeners):
            try:
                listener(registry)
            except Exception:
                LOG.exception("a reload listener failed")

    async def close(self) -> None:
        self.calls.closing = True
        self.desk.stop()
        if self.replica is not None:
            await self.replica.stop()
        if self.notices is not None:
            await self.notices.stop()
        await self.calls.stop()
        if self.replica is not None:  # after the calls above were recorded under its lease
            with contextlib.suppress(Exception):
                self.replica.leave()
        if isinstance(self.runner, SubprocessRunner):
            self.runner.close()
