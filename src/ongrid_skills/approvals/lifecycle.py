"""A request over time: the approved call started once, expiry, the sweeper, recovery.

An approved call starts only after its execution row is claimed (pending_approval → running) in
the transaction that records the start, so a second manager, a recovery pass or a repeated
signature never starts it again; it runs through the manager's one running path
(``runs.start``), never spawned here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ongrid_skills.approvals.checks import Checks
from ongrid_skills.approvals.ledger import Ledger
from ongrid_skills.approvals.runs import Runs
from ongrid_skills.errors import Conflict
from ongrid_skills.execution.records import Status
from ongrid_skills.execution.timeline import EventHub
from ongrid_skills.metrics import Metrics
from ongrid_skills.store import Store
from ongrid_skills.store.approvals import Approval


class Lifecycle:
    """Starts approved calls through ``runs``; expires requests past their TTL."""

    def __init__(
        self,
        store: Store,
        hub: EventHub,
        metrics: Metrics,
        runs: Runs,
        ledger: Ledger,
        checks: Checks,
        *,
        ttl_seconds: float,
        clock: Callable[[], float],
        replica_id: str | None = None,
    ) -> None:
        self.store = store
        self.hub = hub
        self.metrics = metrics
        self.runs = runs
        self.ledger = ledger
        self.checks = checks
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        #: The replica (lease id) an approved call starts on here; None on the embedded store.
        self.replica_id = replica_id
        self._sweeper: asyncio.Task[None] | None = None

    def run(self, approval: Approval) -> None:
        """Start an approved call, once: the execution row is claimed (pending_approval →
        running) in the same transaction that records the start, so a second manager, a
        recovery pass or a repeated signature never starts it again."""
        execution = self.store.executions.get(approval.execution_id)
        if execution is None or execution.status is not Status.PENDING_APPROVAL:
            return
        try:
            skill = self.checks.admissible(approval, pending=False)  # just before the run, again
        except Conflict:
            return
        execution.args = approval.args  # the frozen args, exactly as signed
        execution.credentials = approval.credentials  # and the credentials it was signed with
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
                {
                    "skill": skill.name,
                    "approval_id": approval.id,
                    "args": approval.args,
                    **({"credentials": approval.credentials} if approval.credentials else {}),
                },
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
                self.ledger.close(approval, "expired", "manager", "the request expired")
        return len(due)

    async def recover(self) -> None:
        """After a restart: expire what is due, run what was approved but never started."""
        self.metrics.pending_approvals.set(len(self.store.approvals.with_status("pending")))
        self.expire_due()
        for approval in self.store.approvals.with_status("approved"):
            execution = self.store.executions.get(approval.execution_id)
            if execution is None or execution.status is not Status.PENDING_APPROVAL:
                continue
            self.run(approval)  # re-checks the skill and the gate first
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
