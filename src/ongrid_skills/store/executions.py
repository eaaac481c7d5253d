"""The repository of execution rows and their timeline events.

The writes every call makes go through driver SQL (:mod:`ongrid_skills.store.rawsql`); reads use
SQLAlchemy Core. Status transitions are the manager's and the desk's: this module must never
decide one, except :meth:`ExecutionRepo.claim`, the conditional start of an approved call.

On a shared database each running row names the replica that runs it (``replica_id``, its lease
id): :meth:`ExecutionRepo.orphans` finds the rows no live lease holds, and an update ``held_by``
a replica changes the row only while that replica still holds it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any, NamedTuple, cast

from sqlalchemy import Connection, Table, and_, exists, func, or_, select, union_all

from ongrid_skills.errors import InvalidRequest
from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status
from ongrid_skills.store.connection import Database
from ongrid_skills.store.leases import unheld
from ongrid_skills.store.models import EventRow, ExecutionRow
from ongrid_skills.store.prefix import id_starts_with
from ongrid_skills.store.rawsql import dumps

_EXEC = cast(Table, ExecutionRow.__table__)
_EVENTS = cast(Table, EventRow.__table__)


_UPDATABLE = (
    "status",
    "result_text",
    "error",
    "exit_code",
    "signal",
    "stderr_tail",
    "orphans_killed",
    "persona",
    "requested_by",
    "approval_id",
    "started_at",
    "finished_at",
    "duration_ms",
)
_JSON_COLUMNS = frozenset({"args", "error"})
_INSERT_COLUMNS = (
    "id",
    "skill",
    "status",
    "args",
    "result_text",
    "error",
    "exit_code",
    "signal",
    "stderr_tail",
    "orphans_killed",
    "persona",
    "requested_by",
    "approval_id",
    "definition_hash",
    "idempotency_key",
    "args_hash",
    "created_at",
    "started_at",
    "finished_at",
    "duration_ms",
    "replica_id",
)
_EVENT_COLUMNS = ("execution_id", "seq", "ts", "type", "data")
#: The PostgreSQL channel told, on commit, that a call's row or events changed (payload: its id).
STORED_CHANNEL = "ongrid_stored"


def _params(row: dict[str, Any], columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple(dumps(row[c]) if c in _JSON_COLUMNS else row[c] for c in columns)


def to_row(execution: Execution) -> dict[str, Any]:
    """The columns of an execution's row (JSON columns as Python values)."""
    return {
        "id": execution.id,
        "skill": execution.skill,
        "status": execution.status.value,
        "args": execution.args,
        "result_text": execution.result_text,
        "error": execution.error.to_dict() if execution.error else None,
        "exit_code": execution.exit_code,
        "signal": execution.signal,
        "stderr_tail": execution.stderr_tail,
        "orphans_killed": execution.orphans_killed,
        "persona": execution.persona,
        "requested_by": execution.requested_by,
        "approval_id": execution.approval_id,
        "created_at": execution.created_at,
        "started_at": execution.started_at,
        "finished_at": execution.finished_at,
        "duration_ms": execution.duration_ms,
    }


def from_row(row: Any) -> Execution:
    """An Execution from a row mapping; its result is parsed back from the verbatim text."""
    error = row["error"]
    text = row["result_text"]
    return Execution(
        id=row["id"],
        skill=row["skill"],
        args=row["args"],
        status=Status(row["status"]),
        result=json.loads(text) if text is not None else None,
        result_text=text,
        error=ErrorInfo(error["code"], error["message"], error.get("details")) if error else None,
        exit_code=row["exit_code"],
        signal=row["signal"],
        stderr_tail=row["stderr_tail"] or "",
        orphans_killed=row["orphans_killed"] or 0,
        persona=row["persona"],
        requested_by=row["requested_by"],
        approval_id=row["approval_id"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        duration_ms=row["duration_ms"],
    )


class LastCall(NamedTuple):
    """A skill's newest call, as a list of skills shows it."""

    id: str
    status: Status
    created_at: float


class ExecutionRepo:
    """Execution rows and their events; writes run on the caller's transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db
        raw = db.raw
        self._insert_sql = raw.insert_sql("executions", _INSERT_COLUMNS)
        self._update_sql = raw.update_sql("executions", _UPDATABLE, "id")
        self._update_held_sql = raw.update_sql(
            "executions", _UPDATABLE, "id", "replica_id", "status"
        )
        self._events_sql = raw.insert_sql("execution_events", _EVENT_COLUMNS)
        self._notify = db.dialect == "postgresql"

    def insert(
        self,
        conn: Connection,
        execution: Execution,
        *,
        definition_hash: str | None = None,
        idempotency_key: str | None = None,
        args_hash: str | None = None,
        replica_id: str | None = None,
    ) -> None:
        """Write a new execution's row (before its spawn), with what idempotency needs and the
        replica that runs it."""
        row = to_row(execution)
        row.update(
            definition_hash=definition_hash,
            idempotency_key=idempotency_key,
            args_hash=args_hash,
            replica_id=replica_id,
        )
        self.db.raw.run(conn, self._insert_sql, _params(row, _INSERT_COLUMNS))

    def update(self, conn: Connection, execution: Execution, *, held_by: str | None = None) -> bool:
        """Rewrite the columns an execution changes over its life (status, outcome, times).

        ``held_by``: only while the row is still ``running`` on that replica — False, and
        nothing written, when another replica has ended it meanwhile (its lease had expired)."""
        row = to_row(execution)
        self.stored(conn, execution.id)
        if held_by is None:
            params = (*_params(row, _UPDATABLE), execution.id)
            return bool(self.db.raw.run(conn, self._update_sql, params).rowcount)
        params = (*_params(row, _UPDATABLE), execution.id, held_by, Status.RUNNING.value)
        return bool(self.db.raw.run(conn, self._update_held_sql, params).rowcount)

    def add_events(
        self, conn: Connection, execution_id: str, events: Sequence[tuple[int, Event]]
    ) -> None:
        """Store ``(seq, event)`` pairs of an execution's timeline."""
        if events:
            rows = [(execution_id, seq, e.ts, e.type, dumps(e.data)) for seq, e in events]
            self.db.raw.run_many(conn, self._events_sql, rows)
            self.stored(conn, execution_id)

    def stored(self, conn: Connection, execution_id: str) -> None:
        """On PostgreSQL: tell the listening replicas, when this transaction commits, that the
        call's row or events changed (:data:`STORED_CHANNEL`; repeats within one transaction
        are sent once). It rides the transaction: no commit of its own, nothing when it rolls
        back. Nothing on SQLite (one process: its followers poll)."""
        if self._notify:
            self.db.raw.run(conn, "SELECT pg_notify(%s, %s)", (STORED_CHANNEL, execution_id))

    def last_seq(self, conn: Connection, execution_id: str) -> int:
        """The highest event number stored for an execution (0 when it has none)."""
        value = conn.execute(
            select(func.max(_EVENTS.c.seq)).where(_EVENTS.c.execution_id == execution_id)
        ).scalar()
        return int(value or 0)

    def get(self, execution_id: str) -> Execution | None:
        with self.db.read() as conn:
            row = conn.execute(select(_EXEC).where(_EXEC.c.id == execution_id)).mappings().first()
        return from_row(row) if row else None

    def claim(
        self,
        conn: Connection,
        execution_id: str,
        expected: Status,
        status: Status,
        *,
        replica_id: str | None = None,
    ) -> bool:
        """Move an execution row from ``expected`` to ``status`` only if it still is
        ``expected``: the one start of an approved call, whoever tries it (and on whichever
        replica: the row then names ``replica_id``). A conditional UPDATE is decided on the row
        as it is when written, under PostgreSQL's READ COMMITTED too: a second claimer waits
        for the first one's row lock, then finds the condition false."""
        result = conn.execute(
            _EXEC.update()
            .where(_EXEC.c.id == execution_id, _EXEC.c.status == expected.value)
            .values(status=status.value, replica_id=replica_id)
        )
        return bool(result.rowcount)

    def by_idempotency_key(self, key: str) -> tuple[Execution, str | None] | None:
        """The execution stored under a caller's key, with the digest of the request it answered."""
        with self.db.read() as conn:
            row = (
                conn.execute(select(_EXEC).where(_EXEC.c.idempotency_key == key)).mappings().first()
            )
        return (from_row(row), row["args_hash"]) if row else None

    def events(self, execution_id: str, after: int = 0) -> list[tuple[int, Event]]:
        """The stored timeline after event number ``after``, in order."""
        query = (
            select(_EVENTS.c.seq, _EVENTS.c.ts, _EVENTS.c.type, _EVENTS.c.data)
            .where(and_(_EVENTS.c.execution_id == execution_id, _EVENTS.c.seq > after))
            .order_by(_EVENTS.c.seq)
        )
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [(seq, Event(kind, data, ts)) for seq, ts, kind, data in rows]

    def page(
        self,
        *,
        skill: str | None = None,
        status: str | None = None,
        statuses: Collection[str] = (),
        limit: int = 50,
        cursor: str | None = None,
        id_prefix: str | None = None,
        requested_by: str | None = None,
        host: str | None = None,
    ) -> tuple[list[Execution], str | None]:
        """Newest first; ``cursor`` is the opaque value of the previous page's ``next_cursor``;
        ``statuses``: only the executions in one of these (with ``status``, in both);
        ``id_prefix``: only the executions whose id starts with these hex digits;
        ``requested_by``: only those this principal asked for; ``host``: only the calls handed
        to that edge worker (their timeline's ``dispatched`` event names it)."""
        query = select(_EXEC).order_by(_EXEC.c.created_at.desc(), _EXEC.c.id.desc())
        if id_prefix:
            query = query.where(id_starts_with(_EXEC.c.id, id_prefix))
        if skill:
            query = query.where(_EXEC.c.skill == skill)
        if status:
            query = query.where(_EXEC.c.status == status)
        if statuses:
            query = query.where(_EXEC.c.status.in_(list(statuses)))
        if requested_by:
            query = query.where(_EXEC.c.requested_by == requested_by)
        if host:
            # Why the event and not args.host: a local skill may take a "host" argument too (a
            # port check), and a call refused before it was sent never ran on the host.
            query = query.where(
                exists().where(
                    _EVENTS.c.execution_id == _EXEC.c.id,
                    _EVENTS.c.type == "dispatched",
                    _EVENTS.c.data["host"].as_string() == host,
                )
            )
        if cursor:
            created, ident = decode_cursor(cursor)
            query = query.where(
                or_(
                    _EXEC.c.created_at < created,
                    and_(_EXEC.c.created_at == created, _EXEC.c.id < ident),
                )
            )
        with self.db.read() as conn:
            rows = conn.execute(query.limit(limit + 1)).mappings().all()
        items = [from_row(r) for r in rows[:limit]]
        next_cursor = encode_cursor(items[-1]) if len(rows) > limit and items else None
        return items, next_cursor

    def newest_of(self, skills: Iterable[str]) -> dict[str, LastCall]:
        """The newest call of each of ``skills`` that has one (the catalogue's last run): one
        query, an indexed look of one row per skill (skill, created_at)."""
        names = list(dict.fromkeys(skills))
        if not names:
            return {}
        columns = (_EXEC.c.skill, _EXEC.c.id, _EXEC.c.status, _EXEC.c.created_at)
        # By created_at alone: the index (skill, created_at) then gives the row without a sort.
        order = _EXEC.c.created_at.desc()
        newest = [
            select(*columns).where(_EXEC.c.skill == name).order_by(order).limit(1).subquery()
            for name in names
        ]
        query = union_all(*(select(one) for one in newest))
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return {row[0]: LastCall(row[1], Status(row[2]), row[3]) for row in rows}

    def unfinished(self) -> list[Execution]:
        """Executions still ``running`` in the store (at start-up: left by a dead manager)."""
        with self.db.read() as conn:
            rows = (
                conn.execute(select(_EXEC).where(_EXEC.c.status == Status.RUNNING.value))
                .mappings()
                .all()
            )
        return [from_row(r) for r in rows]

    def orphans(self, conn: Connection, now: float) -> list[tuple[Execution, str | None]]:
        """Rows ``running`` that no live lease holds at ``now`` (the database's clock), with
        the replica each names: it died, or (None) the row predates the shared store."""
        query = select(_EXEC).where(
            _EXEC.c.status == Status.RUNNING.value, unheld(_EXEC.c.replica_id, now)
        )
        rows = conn.execute(query).mappings().all()
        return [(from_row(r), r["replica_id"]) for r in rows]

    def replica_of(self, execution_id: str) -> str | None:
        """The replica an execution's row names (None: the embedded store, or not started)."""
        with self.db.read() as conn:
            value = conn.execute(
                select(_EXEC.c.replica_id).where(_EXEC.c.id == execution_id)
            ).scalar()
        return None if value is None else str(value)

    def count_by_status(self) -> dict[str, int]:
        with self.db.read() as conn:
            rows = conn.execute(select(_EXEC.c.status, func.count()).group_by(_EXEC.c.status))
            return {status: count for status, count in rows}


def encode_cursor(execution: Execution) -> str:
    """The opaque keyset cursor after ``execution``: its (created_at, id) as base64url JSON."""
    raw = json.dumps([execution.created_at, execution.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(created_at, id) from a cursor; a malformed one is :class:`InvalidRequest`."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, ident = json.loads(raw)
        return float(created), str(ident)
    except (ValueError, TypeError) as exc:
        raise InvalidRequest(f"cursor is not valid: {exc}") from None
