"""The reviewer's opinions on requests (SPEC §19): claimed, attached, and counted only where the
rules allow.

A reviewer persona (:mod:`ongrid_skills.agent.reviewer`) reads each new mutating or dangerous
request and answers with an opinion; this module records it on the request, in the audit, and
tells the desk's feed and listeners (kind ``reviewed``). The rules, enforced here:

- One review per request: :meth:`Opinions.claim` is a conditional update, so of two managers
  sharing the store only one reviews it.
- The opinion is advice. It counts as the *one confirmation of a mutating call* only when the
  operator allowed it (``counts``: ``ONGRID_REVIEWER_CONFIRMS_MUTATING``), the decision is
  ``approve``, the request is still pending and one signature is all it needs; the call then
  runs once, through the lifecycle, as after a human's confirmation. It never counts toward a
  dangerous call's signatures, whatever the setting.
- A request decided before the opinion lands keeps its decision; the opinion is attached and
  counts for nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from ongrid_skills.approvals.checks import Checks
from ongrid_skills.approvals.ledger import Ledger
from ongrid_skills.approvals.lifecycle import Lifecycle
from ongrid_skills.errors import Conflict
from ongrid_skills.metrics import Metrics
from ongrid_skills.notify.events import ApprovalEvent
from ongrid_skills.store import Store
from ongrid_skills.store.approvals import Approval, Review, Signature
from ongrid_skills.types import SkillClass

#: The role recorded with a reviewer's confirmation (it is no principal's role: nobody logs in
#: as the reviewer).
REVIEWER_ROLE = "reviewer"
#: The classes a reviewer reads.
REVIEWED = frozenset({SkillClass.MUTATING.value, SkillClass.DANGEROUS.value})


def reviewer_principal(persona: str) -> str:
    """Who the audit says confirmed a call the reviewer's opinion confirmed."""
    return f"reviewer:{persona}"


class Opinions:
    """Claims, records and (where allowed) counts the reviewer's opinions."""

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        ledger: Ledger,
        checks: Checks,
        lifecycle: Lifecycle,
        *,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.ledger = ledger
        self.checks = checks
        self.lifecycle = lifecycle
        self.clock = clock

    def claim(self, approval_id: str, persona: str) -> Approval | None:
        """The request, marked ``reviewing`` by this manager; None when it is not one a
        reviewer reads or another manager claimed it first."""
        approval = self.store.approvals.get(approval_id)
        if approval is None or approval.skill_class not in REVIEWED:
            return None
        review = Review(persona=persona, status="reviewing", started_at=self.clock())
        with self.store.tx() as conn:
            if not self.store.approvals.claim_review(conn, approval_id, review):
                return None
        approval.review = review
        if len(self.ledger.feed):  # the cards say the reviewer is reading; no webhook for that
            self.ledger.feed.hear(ApprovalEvent("reviewed", approval, reviewer_principal(persona)))
        return approval

    def abandoned(self, note: str) -> int:
        """End as failed, with ``note``, every review claimed and never finished (a manager that
        stopped while its reviewer was thinking); return how many. Only for the one manager of
        a data dir: on a shared database another replica may be reviewing them right now."""
        with self.store.read() as conn:
            ids = self.store.approvals.reviewing_ids(conn)
        for approval_id in ids:
            approval = self.store.approvals.get(approval_id)
            if approval is None or approval.review is None:
                continue
            review = approval.review
            review.status, review.note = "failed", note
            self.attach(approval_id, review)
        return len(ids)

    def attach(self, approval_id: str, review: Review, *, counts: bool = False) -> Approval | None:
        """Record a finished review (an opinion with its decision, or the reviewer's failure);
        with ``counts``, an approving opinion confirms a pending mutating call that needs one
        signature, and the call runs once. Returns the request as it is now."""
        review.finished_at = self.clock()
        review.counted = False
        approval = self.store.approvals.get(approval_id)
        if approval is None:
            return None
        confirm = counts and self._may_confirm(approval, review)
        if confirm:
            try:
                self.checks.admissible(approval)  # as at any signature: void if it may not run
            except Conflict:
                confirm = False
        who = reviewer_principal(review.persona)
        try:
            with self.store.tx() as conn:
                fresh = self.store.approvals.locked(conn, approval_id)
                if fresh is None:
                    return None
                review.counted = confirm and self._may_confirm(fresh, review)
                if not self.store.approvals.finish_review(conn, approval_id, review):
                    return fresh  # not claimed here, or finished already
                self.store.audit.append(
                    conn,
                    who,
                    "approval.reviewed",
                    approval_id,
                    {
                        "execution_id": approval.execution_id,
                        "persona": review.persona,
                        "decision": review.decision,
                        "opinion": review.opinion,
                        "note": review.note,
                        "counted": review.counted,
                    },
                )
                if review.counted:
                    self._confirm(conn, fresh, who)
        except Conflict:  # decided elsewhere in between: the opinion is still attached
            return self.attach(approval_id, review, counts=False)
        self.ledger.tell("reviewed", approval_id, who)
        if review.counted:
            self.metrics.pending_approvals.dec()
            self.ledger.tell("approved", approval_id, who)
            self.lifecycle.run(approval)
        return self.store.approvals.get(approval_id)

    @staticmethod
    def _may_confirm(approval: Approval, review: Review) -> bool:
        """An approving opinion of a pending mutating call that one confirmation would run;
        never a dangerous call (its signers are humans, always)."""
        return (
            review.decision == "approve"
            and approval.skill_class == SkillClass.MUTATING.value
            and approval.status == "pending"
            and approval.signatures_required - len(approval.approvals) == 1
        )

    def _confirm(self, conn: Connection, approval: Approval, who: str) -> None:
        """The reviewer's confirmation, in the transaction that records its opinion: a
        signature and the claim pending → approved (as a human's last signature)."""
        now = self.clock()
        signature = Signature(who, REVIEWER_ROLE, "approve", now, "the reviewer's opinion")
        self.store.approvals.add_signature(conn, approval.id, signature)
        self.store.audit.append(
            conn,
            who,
            "approval.signed",
            approval.id,
            {
                "as": "reviewer",
                "execution_id": approval.execution_id,
                "collected": len(approval.approvals) + 1,
                "required": approval.signatures_required,
            },
        )
        if not self.store.approvals.claim(
            conn, approval.id, expected="pending", status="approved", decided_at=now
        ):  # rolls the opinion back with it; attach records it again, uncounted
            raise Conflict(f"approval {approval.id} was decided by someone else")
        self.store.audit.append(
            conn,
            "manager",
            "approval.approved",
            approval.id,
            {"execution_id": approval.execution_id, "by": "reviewer"},
        )
