"""Schedules and their firings (SPEC §21): the ``schedules`` and ``schedule_firings`` tables
(migration 0014).

A firing is claimed by inserting its row: (schedule, fire time) is unique and writers are
serialised database-wide (``Database.tx``), so whichever replica inserts it first runs it and
every other replica finds it taken. ``base`` on the schedule row is the fire time from which
the next one is computed: the last one claimed, or when it was created or resumed. Rows in,
rows out: cron, time zones and what a firing starts are decided above.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, select

from ongrid_skills.errors import NotFound
from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import ScheduleFiringRow, ScheduleRow

_SCHEDULES = cast(Table, ScheduleRow.__table__)
_FIRINGS = cast(Table, ScheduleFiringRow.__table__)


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    name: str
    spec: dict[str, Any]
    paused: bool
    base: float
    created_by: str
    created_at: float
    updated_by: str | None
    updated_at: float | None


@dataclass(frozen=True, slots=True)
class Firing:
    id: str
    schedule: str
    fire_time: float
    how: str  # on_time | missed | manual
    kind: str  # call | run | skipped | failed
    target_id: str | None
    error: str | None
    replica_id: str | None
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fire_time": self.fire_time,
            "how": self.how,
            "kind": self.kind,
            "target_id": self.target_id,
            "error": self.error,
            "created_at": self.created_at,
        }


class ScheduleRepo:
    """Schedule rows and their firings; every change with its audit entry, in one transaction."""

    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.audit = audit

    def all(self) -> list[StoredSchedule]:
        with self.db.read() as conn:
            rows = conn.execute(select(_SCHEDULES).order_by(_SCHEDULES.c.name)).mappings().all()
        return [_schedule(row) for row in rows]

    def get(self, name: str) -> StoredSchedule | None:
        with self.db.read() as conn:
            first = (
                conn.execute(select(_SCHEDULES).where(_SCHEDULES.c.name == name)).mappings().first()
            )
        return None if first is None else _schedule(first)

    def put(self, name: str, spec: dict[str, Any], actor: str) -> bool:
        """Create or replace ``name``; its next firing counts from now. True if created."""
        now = time.time()
        with self.db.tx() as conn:
            exists = conn.execute(select(_SCHEDULES.c.name).where(_SCHEDULES.c.name == name))
            data = {"cron": spec.get("cron"), "timezone": spec.get("timezone")}
            if exists.first() is None:
                self.audit.append(conn, actor, "schedule.created", name, data)
                conn.execute(
                    _SCHEDULES.insert().values(
                        name=name, spec=spec, paused=0, base=now, created_by=actor, created_at=now
                    )
                )
                return True
            self.audit.append(conn, actor, "schedule.updated", name, data)
            conn.execute(
                _SCHEDULES.update()
                .where(_SCHEDULES.c.name == name)
                .values(spec=spec, base=now, updated_by=actor, updated_at=now)
            )
            return False

    def set_paused(self, name: str, paused: bool, actor: str) -> None:
        """Pause, or resume (firings missed while paused are not run: the next counts from now)."""
        now = time.time()
        values: dict[str, Any] = {"paused": int(paused), "updated_by": actor, "updated_at": now}
        if not paused:
            values["base"] = now
        action = "schedule.paused" if paused else "schedule.resumed"
        with self.db.tx() as conn:
            self.audit.append(conn, actor, action, name, {})
            done = conn.execute(
                _SCHEDULES.update().where(_SCHEDULES.c.name == name).values(**values)
            )
            if done.rowcount == 0:
                raise NotFound(f"no schedule named {name!r}")

    def delete(self, name: str, actor: str) -> None:
        with self.db.tx() as conn:
            self.audit.append(conn, actor, "schedule.deleted", name, {})
            if conn.execute(_SCHEDULES.delete().where(_SCHEDULES.c.name == name)).rowcount == 0:
                raise NotFound(f"no schedule named {name!r}")

    def claim(self, firing: Firing, *, advance: bool) -> bool:
        """Insert ``firing`` if nobody has (True: this process runs it), with its audit entry
        (actor ``schedule:<name>``); ``advance`` moves the schedule's base to its fire time."""
        with self.db.tx() as conn:
            taken = conn.execute(
                select(_FIRINGS.c.id).where(
                    _FIRINGS.c.schedule == firing.schedule,
                    _FIRINGS.c.fire_time == firing.fire_time,
                )
            ).first()
            if taken is not None:
                return False
            row = conn.execute(
                select(_SCHEDULES.c.base, _SCHEDULES.c.paused).where(
                    _SCHEDULES.c.name == firing.schedule
                )
            ).first()
            if row is None:
                return False
            if advance and (row[1] or row[0] >= firing.fire_time):
                return False  # paused meanwhile, or another replica moved past it
            conn.execute(
                _FIRINGS.insert().values(
                    id=firing.id,
                    schedule=firing.schedule,
                    fire_time=firing.fire_time,
                    how=firing.how,
                    kind=firing.kind,
                    target_id=firing.target_id,
                    error=firing.error,
                    replica_id=firing.replica_id,
                    created_at=firing.created_at,
                )
            )
            if advance:
                conn.execute(
                    _SCHEDULES.update()
                    .where(_SCHEDULES.c.name == firing.schedule)
                    .values(base=firing.fire_time)
                )
            action = "schedule.skipped" if firing.kind == "skipped" else "schedule.fired"
            data = {"fire_time": firing.fire_time, "how": firing.how}
            self.audit.append(conn, f"schedule:{firing.schedule}", action, firing.id, data)
            return True

    def finish(self, firing_id: str, kind: str, target_id: str | None, error: str | None) -> None:
        with self.db.tx() as conn:
            conn.execute(
                _FIRINGS.update()
                .where(_FIRINGS.c.id == firing_id)
                .values(kind=kind, target_id=target_id, error=error)
            )

    def recent(self, name: str, limit: int = 5) -> list[Firing]:
        query = (
            select(_FIRINGS)
            .where(_FIRINGS.c.schedule == name)
            .order_by(_FIRINGS.c.created_at.desc())
            .limit(limit)
        )
        with self.db.read() as conn:
            return [_firing(row) for row in conn.execute(query).mappings().all()]


def _schedule(row: Any) -> StoredSchedule:
    return StoredSchedule(
        name=row["name"],
        spec=dict(row["spec"]),
        paused=bool(row["paused"]),
        base=row["base"],
        created_by=row["created_by"],
        created_at=row["created_at"],
        updated_by=row["updated_by"],
        updated_at=row["updated_at"],
    )


def _firing(row: Any) -> Firing:
    return Firing(
        id=row["id"],
        schedule=row["schedule"],
        fire_time=row["fire_time"],
        how=row["how"],
        kind=row["kind"],
        target_id=row["target_id"],
        error=row["error"],
        replica_id=row["replica_id"],
        created_at=row["created_at"],
    )


__all__ = ["Firing", "ScheduleRepo", "StoredSchedule"]
