"""The audit log: append-only, hash-chained entries (each carries the SHA-256 of the previous).

``hash = sha256(prev_hash + canonical JSON of (seq, ts, actor, action, subject, data))``. The
chain's head (last seq and hash) is also kept in the settings table, updated in the same
transaction, so deleting the newest entries is detected as well as editing or deleting any other.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, select

from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import AuditRow, SettingRow
from ongrid_skills.store.rawsql import dumps

_AUDIT = cast(Table, AuditRow.__table__)
_SETTINGS = cast(Table, SettingRow.__table__)
_INSERT = _AUDIT.insert()
_SET_HEAD = _SETTINGS.update().where(_SETTINGS.c.key == bindparam("k")).values(value=bindparam("v"))
_ADD_HEAD = _SETTINGS.insert()
GENESIS = "0" * 64
HEAD_KEY = "audit_head"


def entry_hash(
    prev: str, seq: int, ts: float, actor: str, action: str, subject: str | None, data: Any
) -> str:
    body = json.dumps(
        [seq, repr(ts), actor, action, subject, data],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256((prev + body).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    entries: int
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "entries": self.entries, "problems": self.problems}


class AuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db
        raw = db.raw
        self._head_sql = raw.select_sql("settings", "value", "key")
        self._set_head_sql = raw.update_sql("settings", ("value",), "key")
        self._add_head_sql = raw.insert_sql("settings", ("key", "value"))
        self._insert_sql = raw.insert_sql(
            "audit_entries",
            ("seq", "ts", "actor", "action", "subject", "data", "prev_hash", "hash"),
        )
        self.seq = 0  # the last head seen (informational; append always re-reads it)
        self.head = GENESIS

    def append(
        self,
        conn: Connection,
        actor: str,
        action: str,
        subject: str | None = None,
        data: Any = None,
    ) -> int:
        """Add one entry inside the caller's transaction (see Store.tx).

        The head is read inside the transaction, never cached: another process (a CLI on the
        same data dir, another replica) may have appended since. Store.tx takes the write lock
        first (SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT … FOR UPDATE`` of the head row).
        """
        raw = self.db.raw
        row = raw.run(conn, self._head_sql, (HEAD_KEY,)).first()
        value = row[0] if row is not None else None
        if isinstance(value, str):  # JSON text (SQLite); PostgreSQL drivers decode json
            value = json.loads(value)
        if isinstance(value, dict):
            self.seq, self.head = int(value["seq"]), str(value["hash"])
        else:
            self.seq, self.head = 0, GENESIS
        seq = self.seq + 1
        ts = time.time()
        payload = data if data is not None else {}
        digest = entry_hash(self.head, seq, ts, actor, action, subject, payload)
        raw.run(
            conn,
            self._insert_sql,
            (seq, ts, actor, action, subject, dumps(payload), self.head, digest),
        )
        head = dumps({"seq": seq, "hash": digest})
        if raw.run(conn, self._set_head_sql, (head, HEAD_KEY)).rowcount == 0:
            raw.run(conn, self._add_head_sql, (HEAD_KEY, head))
        self.seq, self.head = seq, digest
        return seq

    def entries(
        self,
        *,
        limit: int = 100,
        before: int | None = None,
        action: str | None = None,
        subject: str | None = None,
        actor: str | None = None,
    ) -> list[dict[str, Any]]:
        query = select(AuditRow).order_by(AuditRow.seq.desc()).limit(limit)
        if before is not None:
            query = query.where(AuditRow.seq < before)
        if action:
            query = query.where(AuditRow.action == action)
        if subject:
            query = query.where(AuditRow.subject == subject)
        if actor:
            query = query.where(AuditRow.actor == actor)
        with self.db.read() as conn:
            rows = conn.execute(query).mappings().all()
        return [dict(row) for row in rows]

    def verify(self) -> Verification:
        problems: list[str] = []
        prev, expected_seq, count = GENESIS, 1, 0
        with self.db.read() as conn:
            rows = conn.execute(select(AuditRow).order_by(AuditRow.seq)).mappings()
            for row in rows:
                count += 1
                if row["seq"] != expected_seq:
                    problems.append(f"entries {expected_seq}..{row['seq'] - 1} are missing")
                if row["prev_hash"] != prev:
                    problems.append(f"entry {row['seq']}: previous hash does not match the chain")
                digest = entry_hash(
                    row["prev_hash"],
                    row["seq"],
                    row["ts"],
                    row["actor"],
                    row["action"],
                    row["subject"],
                    row["data"],
                )
                if digest != row["hash"]:
                    problems.append(f"entry {row['seq']}: content does not match its hash")
                prev, expected_seq = row["hash"], row["seq"] + 1
            head = conn.execute(select(SettingRow.value).where(SettingRow.key == HEAD_KEY)).first()
        if head is not None and isinstance(head[0], dict):
            if head[0]["seq"] != expected_seq - 1 or head[0]["hash"] != prev:
                problems.append(
                    f"the chain ends at entry {expected_seq - 1} but its head says "
                    f"{head[0]['seq']}: newest entries were deleted or altered"
                )
        elif count:
            problems.append("the chain head record is missing")
        return Verification(not problems, count, problems)
