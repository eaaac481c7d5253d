"""The approval desk: requests, signatures, rejection, expiry and voiding (SPEC §5).

Rules, all enforced here and nowhere else:

- A signer is a human principal with role operator or admin (admin for dangerous skills).
- The requester never signs their own request; one principal signs at most once.
- Any rejection ends the request. A request expires after the approval TTL.
- A request binds the exact args and the hash of the skill definition at request time; if the
  skill changed since (reload, pack upgrade, edited entry), the request is void.
- For dangerous skills a human requester who confirmed explicitly counts as the first signer.
- When the last signature lands, the call runs server-side with the frozen args.

The desk sees the manager only through the narrow :class:`Runs` port (which is what keeps the two
modules out of an import circle), and tells its ``listeners`` (webhooks, live views) of each
committed change through the port of :mod:`ongrid_skills.notify.events`. It must never decide a
permission itself (it asks :mod:`ongrid_skills.governance.gate`), never spawn a skill
(``runs.start`` does), never start an approved call without claiming its execution row first, and
never speak HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

from sqlalchemy import Connection

from ongrid_skills.approval_feed import ApprovalFeed
from ongrid_skills.errors import Conflict, Forbidden, NotFound
from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status, new_id
from ongrid_skills.execution.timeline import EventHub
from ongrid_skills.governance.gate import (
    admit,
    approver_problem,
    requester_signs_first,
    signer_problem,
)
from ongrid_skills.governance.principal import Principal
from ongrid_skills.metrics import Metrics
from ongrid_skills.notify.events import ApprovalEvent, Listeners
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.store import Store
from ongrid_skills.store.approvals import Approval, Signature
from ongrid_skills.types import Role, SkillClass


class Runs(Protocol):
    """What the desk needs of the manager: the current registry, reading an execution back,
    and starting an approved call on the manager's one running path."""

    @property
    def registry(self) -> Registry: ...

    def get(self, execution_id: str) -> Execution: ...

    def start(self, execution: Execution, skill: Skill) -> asyncio.Task[None]: ...


class ApprovalDesk:
    """Requests, signatures and their end, on the store; the approved call runs through ``runs``."""

    def __init__(
        self,
        store: Store,
        hub: EventHub,
        metrics: Metrics,
        runs: Runs,
        *,
        ttl_seconds: float,
        clock: Callable[[], float],
        replica_id: str | None = None,
    ) -> None:
        self.store = store
        self.hub = hub
        self.metrics = metrics
        self.runs = runs
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        #: The replica (lease id) an approved call starts on here; None on the embedded store.
        self.replica_id = replica_id
        self._sweeper: asyncio.Task[None] | None = None
        #: Both told of every committed change, after the commit: the live feed of the inbox
        #: streams (``GET /v1/approvals/events``, the console), and the listeners of
        #: ongrid_skills.notify.events (webhooks).
        self.feed = ApprovalFeed(store.approvals.get)
        self.listeners = Listeners()

    # ---- requests ------------------------------------------------------------------------
    def request(
        self,
        execution: Execution,
        skill: Skill,
        persona: Persona | None,
        principal: Principal,
        required: int,
        confirmed: bool,
        key: str | None,
        digest: str,
    ) -> Execution:
        """Open a request for a call the gate answered ``approve``; it waits as pending_approval."""
        now = self.clock()
        approval = Approval(
            id=new_id(),
            execution_id=execution.id,
            skill=skill.name,
            skill_class=skill.skill_class.value,
            args=execution.args,
            definition_hash=skill.definition_hash,
            persona=persona.name if persona else None,
            requested_by=principal.name,
            requested_role=principal.role.value,
            signatures_required=required,
            status="pending",
            created_at=now,
            expires_at=now + self.ttl_seconds,
        )
        execution.status = Status.PENDING_APPROVAL
        execution.approval_id = approval.id
        # The requester's explicit confirmation is the first signature of a dangerous call only
        # when they could sign it at all: a human with the admin role (SPEC §5).
        first_signer = requester_signs_first(principal, skill.skill_class, confirmed)
        with self.store.tx() as conn:
            self.store.executions.insert(
                conn,
                execution,
                definition_hash=skill.definition_hash,
                idempotency_key=key,
                args_hash=digest,
            )
            self.store.approvals.insert(conn, approval)
            self.store.audit.append(
                conn,
                principal.name,
                "approval.requested",
                approval.id,
                {
                    "execution_id": execution.id,
                    "skill": skill.name,
                    "class": skill.skill_class.value,
                    "args": execution.args,
                    "persona": approval.persona,
                    "signatures_required": required,
                    "definition_hash": skill.definition_hash,
                },
            )
            if first_signer:
                signature = Signature(principal.name, principal.role.value, "approve", now)
                self.store.approvals.add_signature(conn, approval.id, signature)
                self.store.audit.append(
                    conn,
                    principal.name,
                    "approval.signed",
                    approval.id,
                    {"as": "requester", "execution_id": execution.id},
                )
            self.store.executions.add_events(
                conn,
                execution.id,
                [
                    (
                        1,
                        Event(
                            "approval_pending",
                            {"approval_id": approval.id, "signatures_required": required},
                        ),
                    )
                ],
            )
        self.metrics.pending_approvals.inc()
        self._tell("requested", approval.id, principal.name)
        return execution

    def get(self, approval_id: str) -> Approval:
        """The request; a pending one past its expiry is expired on the way, never shown pending."""
        approval = self.store.approvals.get(approval_id)
        if approval is None:
            raise NotFound(f"unknown approval {approval_id!r}")
        if approval.status == "pending" and approval.expires_at <= self.clock():
            self._close(approval, "expired", "manager", "the request expired")
            approval = self.store.approvals.get(approval_id) or approval
        return approval

    # ---- decisions -----------------------------------------------------------------------
    async def approve(
        self, approval_id: str, principal: Principal, comment: str | None = None
    ) -> Approval:
        """Sign as ``principal``; the last signature approves the request and starts the call."""
        approval = self._open(approval_id, principal)
        problem = approver_problem(
            principal, SkillClass(approval.skill_class), approval.requested_by
        )
        if problem is not None:
            raise Forbidden(problem)
        if any(s.principal == principal.name for s in approval.signatures):
            raise Conflict(f"{principal.name} already signed this request")
        self._admissible(approval)  # at signing: void (and raise) if it may no longer run
        now = self.clock()
        signature = Signature(principal.name, principal.role.value, "approve", now, comment)
        with self.store.tx() as conn:
            # Decide on the request as it is inside this transaction, not as it was read above:
            # another manager sharing the store may have signed or closed it in between.
            fresh = self.store.approvals.locked(conn, approval.id)
            if fresh is None or fresh.status != "pending":
                status = fresh.status if fresh else "gone"
                raise Conflict(f"approval {approval.id} is {status}, not pending")
            if any(s.principal == principal.name for s in fresh.signatures):
                raise Conflict(f"{principal.name} already signed this request")
            collected = len(fresh.approvals) + 1
            done = collected >= fresh.signatures_required
            self.store.approvals.add_signature(conn, approval.id, signature)
            self.store.audit.append(
                conn,
                principal.name,
                "approval.signed",
                approval.id,
                {
                    "execution_id": approval.execution_id,
                    "collected": collected,
                    "required": approval.signatures_required,
                    "comment": comment,
                },
            )
            if done:
                # The claim: pending → approved as a conditional UPDATE, in the transaction that
                # holds this signature and its audit entry. Conditional, because the decision must
                # rest on the row as it is when written, not as it was read: the locked read
                # above serialises signers where the database can, and ``status = 'pending'`` in
                # the WHERE clause is what guarantees one winner even so (another replica, an
                # expiry or a decline committing in between). Inside the transaction, because a
                # loser must leave nothing behind: its signature and audit entry roll back with
                # the raise. Only the winner reaches _run(), so the call starts once.
                claimed = self.store.approvals.claim(
                    conn, approval.id, expected="pending", status="approved", decided_at=now
                )
                if not claimed:  # rolls the signature back with the transaction
                    raise Conflict(f"approval {approval.id} was decided by someone else")
                self.store.audit.append(
                    conn,
                    "manager",
                    "approval.approved",
                    approval.id,
                    {"execution_id": approval.execution_id},
                )
        self._tell("approved" if done else "signed", approval.id, principal.name, comment)
        if done:
            self.metrics.pending_approvals.dec()
            self._run(approval)
        return self.get(approval.id)

    async def reject(
        self, approval_id: str, principal: Principal, comment: str | None = None
    ) -> Approval:
        """Reject as ``principal`` (a signer): any one rejection ends the request."""
        approval = self._open(approval_id, principal)
        if any(s.principal == principal.name for s in approval.signatures):
            raise Conflict(f"{principal.name} already signed this request")
        now = self.clock()
        with self.store.tx() as conn:
            self.store.approvals.add_signature(
                conn,
                approval.id,
                Signature(principal.name, principal.role.value, "reject", now, comment),
            )
        self._close(
            approval, "rejected", principal.name, comment or f"rejected by {principal.name}"
        )
        return self.get(approval.id)

    def decline(self, approval_id: str, principal: Principal, reason: str) -> Execution:
        """The requester turns their own pending request down (e.g. "no" in an MCP client's
        confirmation dialog): it ends ``rejected``, recorded in the audit with the reason."""
        approval = self.get(approval_id)
        if approval.requested_by != principal.name:
            raise Forbidden("only the requester may decline their own request")
        if approval.status != "pending":
            raise Conflict(f"approval {approval.id} is {approval.status}, not pending")
        self._close(approval, "rejected", principal.name, reason)
        return self.runs.get(approval.execution_id)

    def cancel(self, execution: Execution, principal: Principal) -> Execution:
        """Withdraw the pending request behind ``execution`` (the caller checked who may)."""
        assert execution.approval_id is not None
        approval = self.get(execution.approval_id)
        if approval.status != "pending":
            raise Conflict(f"approval {approval.id} is {approval.status}")
        self._close(approval, "cancelled", principal.name, f"cancelled by {principal.name}")
        return self.runs.get(execution.id)

    def _open(self, approval_id: str, principal: Principal) -> Approval:
        problem = signer_problem(principal)
        if problem is not None:
            raise Forbidden(problem)
        approval = self.get(approval_id)
        if approval.status != "pending":
            raise Conflict(f"approval {approval.id} is {approval.status}, not pending")
        return approval

    def _admissible(self, approval: Approval, *, pending: bool = True) -> Skill:
        """The skill as signed, if the call may still run; else void the request and raise.

        Asked at every signature and again just before the run: the skill's definition and
        entry file are unchanged, and the gate still admits the call for the persona and the
        requester as they are now (a persona reloaded stricter, a role lowered or a token
        revoked since the request voids it). ``pending=False``: the request is already approved.
        """
        registry = self.runs.registry  # one snapshot: the skill returned is the one checked
        void = self._void_reason(approval, registry)
        if void is None:
            return registry.get(approval.skill)
        code, reason = void
        self._close(approval, "void", "manager", reason, pending=pending, code=code)
        raise Conflict(reason)

    def _void_reason(self, approval: Approval, registry: Registry) -> tuple[str, str] | None:
        """(error code, reason) when the request may no longer run on ``registry``, else None."""
        skill = registry.skills.get(approval.skill)
        moved = skill is not None and skill.target is not None and skill.target.changed_on_disk()
        if skill is None or moved or skill.definition_hash != approval.definition_hash:
            return "skill_changed", "the skill changed since the request; the request is void"
        persona = None
        if approval.persona is not None:
            persona = registry.personas.get(approval.persona)
            if persona is None:
                reason = f"persona {approval.persona} no longer exists; the request is void"
                return "not_permitted", reason
        role, revoked = self._requester_role(approval)
        if revoked is not None:
            return "not_permitted", f"{revoked}; the request is void"
        decision = admit(skill, persona, role=role)
        if decision.action == "deny":
            return "not_permitted", f"{decision.reason}; the request is void"
        return None

    def _requester_role(self, approval: Approval) -> tuple[Role | None, str | None]:
        """(the requester's role now, None) — their token's, when they hold one, else the role
        recorded with the request (local principals such as ``cli:<user>`` hold no token) —
        or (None, why) when every token of that name has been revoked."""
        tokens = self.store.tokens.named(approval.requested_by)
        if tokens:
            active = [t for t in tokens if t.revoked_at is None]
            if not active:
                return None, f"the requester's token ({approval.requested_by}) was revoked"
            return active[-1].role, None
        return (Role(approval.requested_role) if approval.requested_role else None), None

    def _close(
        self,
        approval: Approval,
        status: str,
        actor: str,
        reason: str,
        *,
        pending: bool = True,
        code: str | None = None,
    ) -> None:
        """End a request: rejected, expired, void or cancelled (the execution too).

        Only from the state it was read in (``pending``, or ``approved`` when ``pending`` is
        False): a conditional update, so an expiry sweep or a rejection never overwrites a
        decision another manager sharing the store made a moment earlier."""
        execution_status = {
            "rejected": Status.REJECTED,
            "expired": Status.EXPIRED,
            "void": Status.REJECTED,
            "cancelled": Status.CANCELLED,
        }[status]
        code = code or {"void": "skill_changed"}.get(status, status)
        now = self.clock()
        execution = self.store.executions.get(approval.execution_id)
        with self.store.tx() as conn:
            claimed = self.store.approvals.claim(
                conn,
                approval.id,
                expected="pending" if pending else "approved",
                status=status,
                decided_at=now,
                reason=reason,
            )
            if not claimed:
                return  # decided elsewhere meanwhile: that decision stands
            if execution is not None and execution.status is Status.PENDING_APPROVAL:
                execution.status = execution_status
                execution.error = ErrorInfo(code, reason)
                execution.finished_at = now
                self.store.executions.update(conn, execution)
                self._event(
                    conn,
                    execution.id,
                    Event("status", {"status": execution_status.value, "reason": reason}),
                )
            self.store.audit.append(
                conn,
                actor,
                f"approval.{status}",
                approval.id,
                {"execution_id": approval.execution_id, "reason": reason},
            )
        if pending:
            self.metrics.pending_approvals.dec()
        self._tell(status, approval.id, actor, reason)
        self.hub.close(approval.execution_id)
        if execution is not None:
            self.metrics.finished(approval.skill, execution_status.value, None)

    def _tell(self, kind: str, approval_id: str, actor: str, note: str | None = None) -> None:
        """Tell the feed and the listeners of a committed change, with the request as it is
        now; read back only when someone listens."""
        if not self.listeners and not len(self.feed):
            return
        approval = self.store.approvals.get(approval_id)
        if approval is not None:
            event = ApprovalEvent(kind, approval, actor, note)
            self.feed.hear(event)
            self.listeners.tell(event)

    def _event(self, conn: Connection, execution_id: str, event: Event) -> None:
        """Record one event of a waiting execution, live for followers and in the store."""
        timeline = self.hub.get(execution_id)
        if timeline is not None:
            seq = timeline.append(event)
            timeline.flushed = len(timeline.events)
        else:
            seq = self.store.executions.last_seq(conn, execution_id) + 1
        self.store.executions.add_events(conn, execution_id, [(seq, event)])

    def _run(self, approval: Approval) -> None:
        """Start an approved call, once: the execution row is claimed (pending_approval →
        running) in the same transaction that records the start, so a second manager, a
        recovery pass or a repeated signature never starts it again."""
        execution = self.store.executions.get(approval.execution_id)
        if execution is None or execution.status is not Status.PENDING_APPROVAL:
            return
        try:
            skill = self._admissible(approval, pending=False)  # just before the run, again
        except Conflict:
            return
        execution.args = approval.args  # the frozen args, exactly as signed
        execution.status = Status.RUNNING
        with self.store.tx() as conn:
            claimed = self.store.executions.claim(
                conn,
                execution.id,
                Status.PENDING_APPROVAL,
                Status.RUNNING,
                replica_id=self.replica_id,
            )
            if not claimed:
                return
            self.store.executions.update(conn, execution)
            self.store.audit.append(
                conn,
                "manager",
                "execution.started",
                execution.id,
                {"skill": skill.name, "approval_id": approval.id, "args": approval.args},
            )
        timeline = self.hub.open(execution.id)
        if not timeline.events:
            timeline.events.extend(self.store.executions.events(execution.id))
            timeline.flushed = len(timeline.events)
        self.runs.start(execution, skill)

    # ---- time ----------------------------------------------------------------------------
    def expire_due(self) -> int:
        """Expire every pending request past its TTL; return how many were due."""
        now = self.clock()
        with self.store.read() as conn:
            due = [i for i, expires in self.store.approvals.pending_ids(conn) if expires <= now]
        for approval_id in due:
            approval = self.store.approvals.get(approval_id)
            if approval is not None and approval.status == "pending":
                self._close(approval, "expired", "manager", "the request expired")
        return len(due)

    async def recover(self) -> None:
        """After a restart: expire what is due, run what was approved but never started."""
        self.metrics.pending_approvals.set(len(self.store.approvals.with_status("pending")))
        self.expire_due()
        for approval in self.store.approvals.with_status("approved"):
            execution = self.store.executions.get(approval.execution_id)
            if execution is None or execution.status is not Status.PENDING_APPROVAL:
                continue
            self._run(approval)  # re-checks the skill and the gate first
        interval = max(1.0, min(60.0, self.ttl_seconds / 4))
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(interval))

    async def _sweep(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                self.expire_due()

    def stop(self) -> None:
        """Stop the expiry sweeper started by :meth:`recover`."""
        if self._sweeper is not None:
            self._sweeper.cancel()
