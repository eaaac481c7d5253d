"""The approval desk: requests, signatures, rejection, expiry and voiding (SPEC §5).

Rules, all enforced in this package and nowhere else:

- A signer is a human principal with role operator or admin (admin for dangerous skills).
- The requester never signs their own request; one principal signs at most once. Who started
  the agent run that asked confirms its mutating calls, and never signs its dangerous ones.
- Any rejection ends the request. A request expires after the approval TTL.
- A request binds the exact args and the hash of the skill definition at request time; if the
  skill changed since (reload, pack upgrade, edited entry), the request is void.
- For dangerous skills a human requester who confirmed explicitly counts as the first signer.
- When the last signature lands, the call runs server-side with the frozen args.

The desk sees the manager only through the narrow port :class:`~.runs.Runs` (which is what keeps
the two modules out of an import circle), and tells its ``listeners`` (webhooks, live views) of
each committed change through the port of :mod:`ongrid_skills.notify.events`. It must never
decide a permission itself (it asks :mod:`ongrid_skills.governance.gate`), never spawn a skill
(``runs.start`` does), never start an approved call without claiming its execution row first, and
never speak HTTP. Its parts: the re-checks at signing time (:mod:`.checks`), the end of a request
and the telling of changes (:mod:`.ledger`), the approved run and time (:mod:`.lifecycle`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ongrid_skills.approvals.checks import Checks
from ongrid_skills.approvals.ledger import Ledger
from ongrid_skills.approvals.lifecycle import Lifecycle
from ongrid_skills.approvals.opinions import Opinions
from ongrid_skills.approvals.previews import Previews
from ongrid_skills.approvals.runs import Runs
from ongrid_skills.errors import Conflict, Forbidden, NotFound
from ongrid_skills.execution.records import Event, Execution, Status, new_id
from ongrid_skills.execution.timeline import EventHub
from ongrid_skills.governance.gate import approver_problem, requester_signs_first, signer_problem
from ongrid_skills.governance.principal import Principal
from ongrid_skills.metrics import Metrics
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.store import Store
from ongrid_skills.store.approvals import Approval, Signature
from ongrid_skills.types import SkillClass


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
        self.metrics = metrics
        self.runs = runs
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        #: Ends requests and tells of every committed change (its feed and listeners).
        self.ledger = Ledger(store, hub, metrics, clock=clock)
        #: Both told of every committed change, after the commit: the live feed of the inbox
        #: streams (``GET /v1/approvals/events``, the console), and the listeners of
        #: ongrid_skills.notify.events (webhooks).
        self.feed = self.ledger.feed
        self.listeners = self.ledger.listeners
        #: Whether a request may still run (at each signature, before the run).
        self.checks = Checks(runs, store, self.ledger)
        #: The approved run, expiry, the sweeper and recovery.
        self.lifecycle = Lifecycle(
            store,
            hub,
            metrics,
            runs,
            self.ledger,
            self.checks,
            ttl_seconds=ttl_seconds,
            clock=clock,
            replica_id=replica_id,
        )
        #: The reviewer's opinions: claimed, attached, counted only where the rules allow.
        self.opinions = Opinions(
            store, metrics, self.ledger, self.checks, self.lifecycle, clock=clock
        )
        #: The previews of requests (SPEC §20): recorded, shown, never a decision.
        self.previews = Previews(store, self.ledger, clock=clock)

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
        *,
        preview: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
    ) -> Execution:
        """Open a request for a call the gate answered ``approve``; it waits as pending_approval.
        ``preview``: what its card shows signers besides the args (install_skill's ``pack``
        summary; ``run``, the skill's own preview, running: see :mod:`.previews`); ``context``:
        what started the call, shown to the signers with it (a trigger's alert)."""
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
            credentials=_names(self.runs.credential_names(skill)) or None,
            preview=preview,
            context=context,
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
                    **({"credentials": approval.credentials} if approval.credentials else {}),
                    **({"preview": preview} if preview else {}),
                    **({"context": context} if context else {}),
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
        self.ledger.tell("requested", approval.id, principal.name)
        return execution

    def get(self, approval_id: str) -> Approval:
        """The request; a pending one past its expiry is expired on the way, never shown pending."""
        approval = self.store.approvals.get(approval_id)
        if approval is None:
            raise NotFound(f"unknown approval {approval_id!r}")
        if approval.status == "pending" and approval.expires_at <= self.clock():
            self.ledger.close(approval, "expired", "manager", "the request expired")
            approval = self.store.approvals.get(approval_id) or approval
        return approval

    # ---- decisions -----------------------------------------------------------------------
    async def approve(
        self, approval_id: str, principal: Principal, comment: str | None = None
    ) -> Approval:
        """Sign as ``principal``; the last signature approves the request and starts the call."""
        approval = self._open(approval_id, principal)
        problem = approver_problem(
            principal,
            SkillClass(approval.skill_class),
            approval.requested_by,
            self.checks.run_starter(approval),
        )
        if problem is not None:
            raise Forbidden(problem)
        if any(s.principal == principal.name for s in approval.signatures):
            raise Conflict(f"{principal.name} already signed this request")
        self.checks.admissible(approval)  # at signing: void (and raise) if it may no longer run
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
                # the raise. Only the winner reaches lifecycle.run(): the call starts once.
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
        self.ledger.tell("approved" if done else "signed", approval.id, principal.name, comment)
        if done:
            self.metrics.pending_approvals.dec()
            self.lifecycle.run(approval)
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
        self.ledger.close(
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
        self.ledger.close(approval, "rejected", principal.name, reason)
        return self.runs.get(approval.execution_id)

    def cancel(self, execution: Execution, principal: Principal) -> Execution:
        """Withdraw the pending request behind ``execution`` (the caller checked who may)."""
        assert execution.approval_id is not None
        approval = self.get(execution.approval_id)
        if approval.status != "pending":
            raise Conflict(f"approval {approval.id} is {approval.status}")
        self.ledger.close(approval, "cancelled", principal.name, f"cancelled by {principal.name}")
        return self.runs.get(execution.id)

    def _open(self, approval_id: str, principal: Principal) -> Approval:
        problem = signer_problem(principal)
        if problem is not None:
            raise Forbidden(problem)
        approval = self.get(approval_id)
        if approval.status != "pending":
            raise Conflict(f"approval {approval.id} is {approval.status}, not pending")
        return approval

    # ---- time ----------------------------------------------------------------------------
    def expire_due(self) -> int:
        """Expire every pending request past its TTL; return how many were due."""
        return self.lifecycle.expire_due()

    async def recover(self) -> None:
        """After a restart: expire what is due, run what was approved but never started."""
        await self.lifecycle.recover()

    def stop(self) -> None:
        """Stop the expiry sweeper started by :meth:`recover`."""
        self.lifecycle.stop()


def _names(bound: dict[str, str | None]) -> dict[str, str]:
    """The slots that have a credential (a request is made only for a skill with all bound)."""
    return {slot: name for slot, name in bound.items() if name is not None}
