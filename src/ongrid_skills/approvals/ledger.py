"""The end of a request, and the telling of every change the desk commits.

A request ends ``rejected``, ``expired``, ``void`` or ``cancelled`` only from the state it was
read in (a conditional update: a decision another manager sharing the store made a moment
earlier stands), and its waiting execution ends with it. Each committed change is told, after
the commit, to the live feed of the inbox streams and to the listeners of
:mod:`ongrid_skills.notify.events` (webhooks).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from ongrid_skills.approvals.feed import ApprovalFeed
from ongrid_skills.execution.records import ErrorInfo, Event, Status
from ongrid_skills.execution.timeline import EventHub
from ongrid_skills.metrics import Metrics
from ongrid_skills.notify.events import ApprovalEvent, Listeners
from ongrid_skills.store import Store
from ongrid_skills.store.approvals import Approval


class Ledger:
    """Ends requests on the store and tells who listens; decides nothing itself."""

    def __init__(
        self, store: Store, hub: EventHub, metrics: Metrics, *, clock: Callable[[], float]
    ) -> None:
        self.store = store
        self.hub = hub
        self.metrics = metrics
        self.clock = clock
        #: Both told of every committed change, after the commit: the live feed of the inbox
        #: streams (``GET /v1/approvals/events``, the console), and the listeners of
        #: ongrid_skills.notify.events (webhooks).
        self.feed = ApprovalFeed(store.approvals.get)
        self.listeners = Listeners()

    def close(
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
        self.tell(status, approval.id, actor, reason)
        self.hub.close(approval.execution_id)
        if execution is not None:
            self.metrics.finished(approval.skill, execution_status.value, None)

    def tell(self, kind: str, approval_id: str, actor: str, note: str | None = None) -> None:
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
