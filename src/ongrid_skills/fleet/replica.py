"""Replicas: this manager's lease on a shared database, and the calls of replicas that died.

Every manager process on a shared (PostgreSQL) database is a replica. It holds a lease, a row of
the ``replicas`` table whose expiry it pushes forward at every heartbeat (a third of
``ONGRID_REPLICA_LEASE_TTL_SECONDS``), under an id that is new at each start. The rows of the calls
it runs name that id. After each heartbeat a replica *sweeps*: in one write transaction it ends
the leases that expired and turns every ``running`` row that no live lease holds into
``interrupted``, with an audit entry each. The writers' lock of the database makes the sweeps of
several replicas run one after the other, so each dead replica's calls are ended exactly once,
by whichever replica got there first; the listeners (the agent kernel, which adopts waiting runs)
are told after each sweep.

Invariants, and why:

- A live lease is never ended and the calls it holds are never interrupted: a replica starting
  (or restarting, under a new id) only sweeps what expired, so it never ends another's calls.
- A replica that finds its lease gone (it stalled longer than the TTL, and another replica ended
  it) takes a new lease under the same id and says so: the calls it was running were interrupted
  by that sweep, and their late outcomes are refused (``ExecutionRepo.update(held_by=…)``).

This module never starts, cancels or kills a call; it only records what became of orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable

from sqlalchemy import Connection

from ongrid_skills.execution.records import ErrorInfo, Execution, Status, new_id
from ongrid_skills.store import Store

LOG = logging.getLogger("ongrid_skills.fleet")
LEASE_EXPIRED = "its replica stopped while this call ran (its lease expired)"


def interrupt(
    store: Store, conn: Connection, executions: Iterable[Execution], reason: str, at: float
) -> list[Execution]:
    """Record calls nobody runs any more as ``interrupted``, on the caller's transaction."""
    ended: list[Execution] = []
    for execution in executions:
        execution.status = Status.INTERRUPTED
        execution.error = ErrorInfo("interrupted", reason)
        execution.finished_at = at
        store.executions.update(conn, execution)
        store.audit.append(
            conn, "manager", "execution.interrupted", execution.id, {"skill": execution.skill}
        )
        ended.append(execution)
    return ended


class Replica:
    """The lease of this manager process on a shared database, and its heartbeat."""

    def __init__(self, store: Store, *, ttl: float, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.ttl = float(ttl)
        self.clock = clock
        self.id = new_id()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        #: Called in the event loop after every sweep (e.g. the agent kernel adopting runs).
        self.listeners: list[Callable[[], None]] = []
        #: Called with the calls each sweep interrupted (metrics).
        self.on_interrupted: Callable[[list[Execution]], None] = lambda _ended: None
        self._task: asyncio.Task[None] | None = None

    @property
    def heartbeat_seconds(self) -> float:
        """How often the lease is renewed: three heartbeats fit in one TTL."""
        return self.ttl / 3

    def join(self) -> None:
        """Take the lease; done before this process writes any running row."""
        with self.store.tx() as conn:
            self.store.leases.acquire(conn, self.id, self.host, self.pid, self.ttl)
        LOG.info(
            "replica %s (host %s, pid %d): lease of %g s, renewed every %g s",
            self.id,
            self.host,
            self.pid,
            self.ttl,
            self.heartbeat_seconds,
        )

    def renew(self) -> bool:
        """Extend the lease; False when it had been ended (and is now taken again)."""
        with self.store.tx() as conn:
            if self.store.leases.renew(conn, self.id, self.ttl):
                return True
            self.store.leases.acquire(conn, self.id, self.host, self.pid, self.ttl)
        LOG.error(
            "replica %s: its lease had expired and another replica ended it (the calls running "
            "here were recorded interrupted there); lease taken again",
            self.id,
        )
        return False

    def sweep(self) -> list[Execution]:
        """End the expired leases and interrupt the calls no live lease holds; return them."""
        with self.store.tx() as conn:
            now = self.store.leases.now(conn)
            ended = self.store.leases.end_expired(conn, now)
            orphans = self.store.executions.orphans(conn, now)
            for lease in ended:
                held = [e.id for e, replica in orphans if replica == lease.id]
                self.store.audit.append(
                    conn,
                    "manager",
                    "replica.lease_expired",
                    lease.id,
                    {"host": lease.host, "pid": lease.pid, "by": self.id, "interrupted": held},
                )
            interrupted = interrupt(
                self.store, conn, [e for e, _replica in orphans], LEASE_EXPIRED, self.clock()
            )
        if ended or interrupted:
            LOG.warning(
                "replica %s: ended %d expired lease(s), interrupted %d call(s)",
                self.id,
                len(ended),
                len(interrupted),
            )
        return interrupted

    def start(self) -> None:
        """Start the heartbeat (renew, sweep, tell the listeners) in the running loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await asyncio.to_thread(self.renew)
                ended = await asyncio.to_thread(self.sweep)
            except Exception:  # the database is unreachable: the next beat tries again
                LOG.exception("replica %s: heartbeat failed", self.id)
                continue
            if ended:
                self.on_interrupted(ended)
            for listener in list(self.listeners):
                try:
                    listener()
                except Exception:
                    LOG.exception("a replica sweep listener failed")

    async def stop(self) -> None:
        """Stop the heartbeat (the lease stays until :meth:`leave`)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def leave(self) -> None:
        """Give the lease up, once this process's calls are recorded (a clean stop)."""
        with self.store.tx() as conn:
            self.store.leases.release(conn, self.id)
