"""Alert triggers and what they started (SPEC §21): the ``triggers`` and ``trigger_starts``
tables (migration 0014).

A trigger row holds its rules (``spec``, checked above: ``ongrid_skills.automation``) and the
SHA-256 of its token, never the token. A start row is what one rule did for one firing alert:
it is written in the same transaction that checks the duplicate (rule, fingerprint, startsAt)
and the rule's rate limit, with its audit entry; writers are serialised database-wide (see
``Database.tx``), so two replicas given the same notification start it once. Rows in, rows out:
what a start is and what the gate says about it are decided above.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, func, select

from ongrid_skills.errors import Conflict, NotFound
from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import TriggerRow, TriggerStartRow

_TRIGGERS = cast(Table, TriggerRow.__table__)
_STARTS = cast(Table, TriggerStartRow.__table__)


@dataclass(frozen=True, slots=True)
class StoredTrigger:
    name: str
    token_hash: str
    spec: dict[str, Any]
    created_by: str
    created_at: float
    updated_by: str | None
    updated_at: float | None


@dataclass(frozen=True, slots=True)
class Start:
    """One rule's answer to one alert: a call, an agent run, or why nothing started."""

    id: str
    trigger: str
    rule: str
    dedupe: str
    fingerprint: str
    kind: str  # call | run | rate_limited | failed
    target_id: str | None
    alert: dict[str, Any]
    error: str | None
    created_at: float
    resolved_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rule": self.rule,
            "fingerprint": self.fingerprint,
            "kind": self.kind,
            "target_id": self.target_id,
            "status": self.alert.get("status"),
            "alertname": (self.alert.get("labels") or {}).get("alertname"),
            "error": self.error,
            "created_at": self.created_at,
            "resolved_at": self.resolved_at,
        }


class TriggerRepo:
    """Trigger rows and their starts; every change with its audit entry, in one transaction."""

    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.audit = audit

    # ---- triggers ------------------------------------------------------------------------
    def all(self) -> list[StoredTrigger]:
        with self.db.read() as conn:
            rows = conn.execute(select(_TRIGGERS).order_by(_TRIGGERS.c.name)).mappings().all()
        return [_trigger(row) for row in rows]

    def get(self, name: str) -> StoredTrigger | None:
        with self.db.read() as conn:
            row = conn.execute(select(_TRIGGERS).where(_TRIGGERS.c.name == name)).mappings()
            first = row.first()
        return None if first is None else _trigger(first)

    def put(self, name: str, spec: dict[str, Any], actor: str, token_hash: str | None) -> bool:
        """Create (``token_hash`` required) or replace the rules of ``name``; True if created."""
        now = time.time()
        with self.db.tx() as conn:
            exists = conn.execute(select(_TRIGGERS.c.name).where(_TRIGGERS.c.name == name)).first()
            summary = {
                "rules": [r.get("name") for r in spec.get("rules", [])],
                "role": spec.get("role"),
            }
            if exists is None:
                if token_hash is None:
                    raise NotFound(f"no trigger named {name!r}")
                self.audit.append(conn, actor, "trigger.created", name, summary)
                conn.execute(
                    _TRIGGERS.insert().values(
                        name=name,
                        token_hash=token_hash,
                        spec=spec,
                        created_by=actor,
                        created_at=now,
                    )
                )
                return True
            self.audit.append(conn, actor, "trigger.updated", name, summary)
            values: dict[str, Any] = {"spec": spec, "updated_by": actor, "updated_at": now}
            if token_hash is not None:
                values["token_hash"] = token_hash
            conn.execute(_TRIGGERS.update().where(_TRIGGERS.c.name == name).values(**values))
            return False

    def rotate(self, name: str, token_hash: str, actor: str) -> None:
        with self.db.tx() as conn:
            self.audit.append(conn, actor, "trigger.token_rotated", name, {})
            done = conn.execute(
                _TRIGGERS.update()
                .where(_TRIGGERS.c.name == name)
                .values(token_hash=token_hash, updated_by=actor, updated_at=time.time())
            )
            if done.rowcount == 0:
                raise NotFound(f"no trigger named {name!r}")

    def delete(self, name: str, actor: str) -> None:
        with self.db.tx() as conn:
            self.audit.append(conn, actor, "trigger.deleted", name, {})
            if conn.execute(_TRIGGERS.delete().where(_TRIGGERS.c.name == name)).rowcount == 0:
                raise NotFound(f"no trigger named {name!r}")

    # ---- starts --------------------------------------------------------------------------
    def seen(self, conn: Connection, trigger: str, dedupe: str) -> bool:
        """Whether a start with this dedupe key exists (inside the writer's transaction)."""
        query = select(_STARTS.c.id).where(_STARTS.c.trigger == trigger, _STARTS.c.dedupe == dedupe)
        return conn.execute(query).first() is not None

    def count_since(self, conn: Connection, trigger: str, rule: str, since: float) -> int:
        """Starts of ``rule`` that started something (a call or a run) since ``since``."""
        query = select(func.count()).where(
            _STARTS.c.trigger == trigger,
            _STARTS.c.rule == rule,
            _STARTS.c.kind.in_(("call", "run")),
            _STARTS.c.created_at >= since,
        )
        return int(conn.execute(query).scalar_one())

    def record(self, conn: Connection, start: Start) -> None:
        if self.seen(conn, start.trigger, start.dedupe):
            raise Conflict("this alert already started something")
        conn.execute(
            _STARTS.insert().values(
                id=start.id,
                trigger=start.trigger,
                rule=start.rule,
                dedupe=start.dedupe,
                fingerprint=start.fingerprint,
                kind=start.kind,
                target_id=start.target_id,
                alert=start.alert,
                error=start.error,
                created_at=start.created_at,
            )
        )

    def set_target(
        self, start_id: str, kind: str, target_id: str | None, error: str | None
    ) -> None:
        with self.db.tx() as conn:
            conn.execute(
                _STARTS.update()
                .where(_STARTS.c.id == start_id)
                .values(kind=kind, target_id=target_id, error=error)
            )

    def firing(self, conn: Connection, trigger: str, fingerprint: str) -> list[Start]:
        """The unresolved starts of an alert (by fingerprint), inside the caller's transaction."""
        query = select(_STARTS).where(
            _STARTS.c.trigger == trigger,
            _STARTS.c.fingerprint == fingerprint,
            _STARTS.c.resolved_at.is_(None),
        )
        return [_start(row) for row in conn.execute(query).mappings().all()]

    def resolve(self, conn: Connection, start: Start, now: float) -> None:
        """Mark it resolved; its dedupe key is freed, so the alert firing again starts anew."""
        conn.execute(
            _STARTS.update()
            .where(_STARTS.c.id == start.id)
            .values(resolved_at=now, dedupe=f"{start.dedupe[:250]}#resolved:{start.id}")
        )

    def recent(self, trigger: str, limit: int = 10) -> list[Start]:
        query = (
            select(_STARTS)
            .where(_STARTS.c.trigger == trigger)
            .order_by(_STARTS.c.created_at.desc())
            .limit(limit)
        )
        with self.db.read() as conn:
            return [_start(row) for row in conn.execute(query).mappings().all()]


def _trigger(row: Any) -> StoredTrigger:
    return StoredTrigger(
        name=row["name"],
        token_hash=row["token_hash"],
        spec=dict(row["spec"]),
        created_by=row["created_by"],
        created_at=row["created_at"],
        updated_by=row["updated_by"],
        updated_at=row["updated_at"],
    )


def _start(row: Any) -> Start:
    return Start(
        id=row["id"],
        trigger=row["trigger"],
        rule=row["rule"],
        dedupe=row["dedupe"],
        fingerprint=row["fingerprint"],
        kind=row["kind"],
        target_id=row["target_id"],
        alert=dict(row["alert"]),
        error=row["error"],
        created_at=row["created_at"],
        resolved_at=row["resolved_at"],
    )


__all__ = ["Start", "StoredTrigger", "TriggerRepo"]
