"""Start-up recovery of the calls a dead manager left running.

They are killed (normally the dead manager's sentinel has done it already; not if it died too)
and their rows become interrupted. On a shared database, only the calls of replicas whose lease
expired are interrupted, and this replica's lease is taken first. The approval desk recovers its
own requests afterwards (:meth:`ongrid_skills.approvals.desk.ApprovalDesk.recover`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ongrid_skills.execution.records import Execution
from ongrid_skills.execution.supervision import kill_left_behind
from ongrid_skills.fleet.replica import Replica, interrupt
from ongrid_skills.metrics import Metrics
from ongrid_skills.store import Store

LOG = logging.getLogger("ongrid_skills.manager")


async def end_left_behind(
    store: Store,
    replica: Replica | None,
    metrics: Metrics,
    *,
    groups_dir: str,
    clock: Callable[[], float],
) -> None:
    """Kill what a dead manager left running and record its calls interrupted; on a shared
    database, join ``replica``'s lease and sweep the calls of expired ones (and of later
    sweeps, told to the metrics as they end)."""

    def interrupted(executions: list[Execution]) -> None:
        for execution in executions:
            metrics.finished(execution.skill, execution.status.value, None)

    # Normally the dead manager's sentinel has done this already; not if it died too.
    killed = await asyncio.to_thread(kill_left_behind, groups_dir)
    if killed:
        LOG.warning("killed %d call(s) a dead manager had left running", killed)
    if replica is not None:
        replica.on_interrupted = interrupted
        replica.join()
        interrupted(replica.sweep())
    else:
        left = store.executions.unfinished()
        with store.tx() as conn:
            reason = "the manager stopped while this call ran"
            interrupted(interrupt(store, conn, left, reason, clock()))
