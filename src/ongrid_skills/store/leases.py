"""The repository of replica leases: one heartbeat row per manager process on a shared database.

Table ``replicas`` (migration 0005). A replica writes its row when it starts, pushes ``expires_at``
forward at every heartbeat and deletes the row when it stops cleanly. Lease times are the
database server's clock (:meth:`LeaseRepo.now`), never a replica's own, so clocks that disagree
between the replicas' hosts cannot make a live lease look expired. A row or a call is *held* while
its replica's lease has not expired; :func:`unheld` is the condition "nobody live holds it".

Rows in, rows out: what becomes of the calls of an expired lease is decided above
(:mod:`ongrid_skills.fleet.replica`); this module must never touch an execution or a run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import ColumnElement, Connection, Table, delete, insert, or_, select, update

from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import ReplicaRow

_REPLICAS = cast(Table, ReplicaRow.__table__)


@dataclass(frozen=True, slots=True)
class Lease:
    """One replica's lease as stored (times in the database's clock)."""

    id: str
    host: str
    pid: int
    started_at: float
    renewed_at: float
    expires_at: float


def unheld(column: Any, now: float) -> ColumnElement[bool]:
    """``column`` (a replica id) names no live lease: none at all, or one expired or ended."""
    live = select(_REPLICAS.c.id).where(_REPLICAS.c.expires_at >= now)
    return or_(column.is_(None), column.not_in(live))


class LeaseRepo:
    """Lease rows; writes run on the caller's transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def now(self, conn: Connection) -> float:
        """The database's clock, in UNIX seconds (SQLite is on this host: the local clock)."""
        if self.db.dialect == "postgresql":
            clock = conn.exec_driver_sql("SELECT EXTRACT(EPOCH FROM clock_timestamp())")
            return float(clock.one()[0])
        return time.time()

    def acquire(self, conn: Connection, replica_id: str, host: str, pid: int, ttl: float) -> None:
        """Write a new lease valid for ``ttl`` seconds from now."""
        now = self.now(conn)
        conn.execute(
            insert(_REPLICAS).values(
                id=replica_id,
                host=host[:255],
                pid=pid,
                started_at=now,
                renewed_at=now,
                expires_at=now + ttl,
            )
        )

    def renew(self, conn: Connection, replica_id: str, ttl: float) -> bool:
        """Extend the lease to ``ttl`` seconds from now; False when it no longer exists (it
        expired and another replica ended it, interrupting its calls)."""
        now = self.now(conn)
        result = conn.execute(
            update(_REPLICAS)
            .where(_REPLICAS.c.id == replica_id)
            .values(renewed_at=now, expires_at=now + ttl)
        )
        return bool(result.rowcount)

    def release(self, conn: Connection, replica_id: str) -> None:
        """Delete a lease (its replica stopped cleanly, its calls recorded)."""
        conn.execute(delete(_REPLICAS).where(_REPLICAS.c.id == replica_id))

    def end_expired(self, conn: Connection, now: float) -> list[Lease]:
        """Delete the leases expired at ``now`` and return them."""
        rows = conn.execute(select(_REPLICAS).where(_REPLICAS.c.expires_at < now)).mappings()
        ended = [Lease(**row) for row in rows]
        if ended:
            conn.execute(delete(_REPLICAS).where(_REPLICAS.c.id.in_([e.id for e in ended])))
        return ended

    def all(self) -> list[Lease]:
        """Every lease, live or expired, oldest first."""
        with self.db.read() as conn:
            rows = conn.execute(select(_REPLICAS).order_by(_REPLICAS.c.started_at)).mappings()
            return [Lease(**row) for row in rows]
