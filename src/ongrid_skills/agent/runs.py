"""Storage of agent runs: the run rows, their transcripts and their event timelines.

Tables ``agent_runs``, ``agent_messages`` and ``agent_events`` (migration 0002). A transcript entry
is one typed part of :mod:`ongrid_skills.agent.transcript`, stored one row per part (its kind as
``role``, its fields as ``content``), numbered from 1; events keep the sequence numbers of the
run's live timeline (:mod:`ongrid_skills.agent.events` reads them back typed).

On a shared database each run names the replica that drives it (``replica_id``, migration 0004);
:meth:`RunStore.adopt` is how a run whose replica died passes to exactly one other replica.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, and_, func, select, update

from ongrid_skills.agent.transcript import Part, part_content, part_of
from ongrid_skills.execution.records import ErrorInfo, Event, iso, new_id
from ongrid_skills.store import Store
from ongrid_skills.store.leases import unheld
from ongrid_skills.store.models import AgentEventRow, AgentMessageRow, AgentRunRow

_RUNS = cast(Table, AgentRunRow.__table__)
_MESSAGES = cast(Table, AgentMessageRow.__table__)
_EVENTS = cast(Table, AgentEventRow.__table__)


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    DONE = "done"
    FAILED = "failed"
    MAX_TURNS = "max_turns"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self not in (RunStatus.RUNNING, RunStatus.WAITING_APPROVAL)


@dataclass(slots=True)
class RunRecord:
    persona: str
    requested_by: str
    role: str
    provider: str
    model: str
    id: str = field(default_factory=new_id)
    status: RunStatus = RunStatus.RUNNING
    turns: int = 0
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    final_answer: str | None = None
    error: ErrorInfo | None = None
    replica_id: str | None = None  # the replica driving it (shared database); not shown
    parent_run_id: str | None = None  # a delegated run: the run that started it
    parent_call_id: str | None = None  # ... and its ``delegate`` call
    depth: int = 0  # 0: started by a human; 1: delegated; 2: delegated by a delegated run

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "persona": self.persona,
            "requested_by": self.requested_by,
            "role": self.role,
            "status": self.status.value,
            "provider": self.provider,
            "model": self.model,
            "turns": self.turns,
            "created_at": iso(self.created_at),
            "finished_at": iso(self.finished_at),
            "final_answer": self.final_answer,
            "error": self.error.to_dict() if self.error else None,
            "parent_run_id": self.parent_run_id,
            "parent_call_id": self.parent_call_id,
            "depth": self.depth,
        }


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One stored transcript entry: ``role`` is its part's kind, ``content`` its fields."""

    seq: int
    role: str
    content: dict[str, Any]
    created_at: float

    @property
    def part(self) -> Part:
        """The entry as its typed part (:mod:`ongrid_skills.agent.transcript`)."""
        return part_of(self.role, self.content)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "role": self.role, **self.content, "ts": iso(self.created_at)}


def _row(record: RunRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "persona": record.persona,
        "requested_by": record.requested_by,
        "role": record.role,
        "status": record.status.value,
        "provider": record.provider,
        "model": record.model,
        "turns": record.turns,
        "created_at": record.created_at,
        "finished_at": record.finished_at,
        "final_answer": record.final_answer,
        "error": record.error.to_dict() if record.error else None,
        "replica_id": record.replica_id,
        "parent_run_id": record.parent_run_id,
        "parent_call_id": record.parent_call_id,
        "depth": record.depth,
    }


def _record(row: Any) -> RunRecord:
    error = row["error"]
    return RunRecord(
        id=row["id"],
        persona=row["persona"],
        requested_by=row["requested_by"],
        role=row["role"],
        provider=row["provider"],
        model=row["model"],
        status=RunStatus(row["status"]),
        turns=row["turns"] or 0,
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        final_answer=row["final_answer"],
        error=ErrorInfo(error["code"], error["message"], error.get("details")) if error else None,
        replica_id=row["replica_id"],
        parent_run_id=row["parent_run_id"],
        parent_call_id=row["parent_call_id"],
        depth=row["depth"] or 0,
    )


class RunStore:
    """Runs, transcripts and events on the manager's store (same engine, same write lock)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # ---- runs ------------------------------------------------------------------------------
    def insert(self, record: RunRecord) -> None:
        with self.store.tx() as conn:
            conn.execute(_RUNS.insert(), _row(record))

    def update(self, record: RunRecord) -> None:
        row = _row(record)
        del row["id"]
        with self.store.tx() as conn:
            conn.execute(_RUNS.update().where(_RUNS.c.id == record.id).values(**row))

    def get(self, run_id: str) -> RunRecord | None:
        with self.store.read() as conn:
            row = conn.execute(select(_RUNS).where(_RUNS.c.id == run_id)).mappings().first()
        return _record(row) if row else None

    def page(
        self, *, status: str | None = None, requested_by: str | None = None, limit: int = 50
    ) -> list[RunRecord]:
        """The newest runs first; of one status, of one requester (the console's chat)."""
        query = select(_RUNS).order_by(_RUNS.c.created_at.desc(), _RUNS.c.id.desc())
        if status:
            query = query.where(_RUNS.c.status == status)
        if requested_by is not None:
            query = query.where(_RUNS.c.requested_by == requested_by)
        with self.store.read() as conn:
            rows = conn.execute(query.limit(limit)).mappings().all()
        return [_record(r) for r in rows]

    def children(self, run_id: str) -> list[RunRecord]:
        """The runs a run's ``delegate`` calls started, oldest first."""
        query = (
            select(_RUNS)
            .where(_RUNS.c.parent_run_id == run_id)
            .order_by(_RUNS.c.created_at, _RUNS.c.id)
        )
        with self.store.read() as conn:
            rows = conn.execute(query).mappings().all()
        return [_record(r) for r in rows]

    def with_status(self, statuses: Iterable[RunStatus]) -> list[RunRecord]:
        values = [s.value for s in statuses]
        query = select(_RUNS).where(_RUNS.c.status.in_(values)).order_by(_RUNS.c.created_at)
        with self.store.read() as conn:
            rows = conn.execute(query).mappings().all()
        return [_record(r) for r in rows]

    def orphans(self, statuses: Iterable[RunStatus]) -> list[RunRecord]:
        """Runs of these statuses that no live replica drives (a shared database's leases)."""
        values = [s.value for s in statuses]
        with self.store.read() as conn:
            now = self.store.leases.now(conn)
            query = select(_RUNS).where(_RUNS.c.status.in_(values), unheld(_RUNS.c.replica_id, now))
            rows = conn.execute(query.order_by(_RUNS.c.created_at)).mappings().all()
        return [_record(r) for r in rows]

    def adopt(self, record: RunRecord, replica_id: str) -> bool:
        """Make ``replica_id`` the run's driver if it still has its status and no live replica
        drives it: one conditional UPDATE, so of several replicas adopting it at once exactly
        one succeeds. On success the record names its new replica."""
        with self.store.tx() as conn:
            now = self.store.leases.now(conn)
            result = conn.execute(
                update(_RUNS)
                .where(
                    _RUNS.c.id == record.id,
                    _RUNS.c.status == record.status.value,
                    unheld(_RUNS.c.replica_id, now),
                )
                .values(replica_id=replica_id)
            )
        if not result.rowcount:
            return False
        record.replica_id = replica_id
        return True

    # ---- transcript ------------------------------------------------------------------------
    def add_message(self, run_id: str, seq: int, part: Part) -> None:
        with self.store.tx() as conn:
            conn.execute(
                _MESSAGES.insert(),
                {
                    "run_id": run_id,
                    "seq": seq,
                    "role": part.kind,
                    "content": part_content(part),
                    "created_at": time.time(),
                },
            )

    def messages(self, run_id: str) -> list[StoredMessage]:
        query = (
            select(_MESSAGES.c.seq, _MESSAGES.c.role, _MESSAGES.c.content, _MESSAGES.c.created_at)
            .where(_MESSAGES.c.run_id == run_id)
            .order_by(_MESSAGES.c.seq)
        )
        with self.store.read() as conn:
            rows = conn.execute(query).all()
        return [StoredMessage(seq, role, content, ts) for seq, role, content, ts in rows]

    # ---- events ----------------------------------------------------------------------------
    def add_events(self, run_id: str, events: Sequence[tuple[int, Event]]) -> None:
        if not events:
            return
        with self.store.tx() as conn:
            conn.execute(
                _EVENTS.insert(),
                [
                    {"run_id": run_id, "seq": seq, "ts": e.ts, "type": e.type, "data": e.data}
                    for seq, e in events
                ],
            )

    def events(self, run_id: str, after: int = 0) -> list[tuple[int, Event]]:
        query = (
            select(_EVENTS.c.seq, _EVENTS.c.ts, _EVENTS.c.type, _EVENTS.c.data)
            .where(and_(_EVENTS.c.run_id == run_id, _EVENTS.c.seq > after))
            .order_by(_EVENTS.c.seq)
        )
        with self.store.read() as conn:
            rows = conn.execute(query).all()
        return [(seq, Event(kind, data, ts)) for seq, ts, kind, data in rows]

    def last_event_seq(self, run_id: str) -> int:
        with self.store.read() as conn:
            value = conn.execute(
                select(func.max(_EVENTS.c.seq)).where(_EVENTS.c.run_id == run_id)
            ).scalar()
        return int(value or 0)
