"""The audit log: append-only entries chained by a keyed hash, anchored outside the database.

``hash = HMAC-SHA256(key, prev_hash + canonical JSON of (seq, ts, actor, action, subject, data))``
with the key of :mod:`~ongrid_skills.store.auditkey`, kept outside the database. Entries written
before the chain was keyed carry the plain SHA-256 of the same text; they form a prefix, and the
first keyed entry (whose MAC covers their last hash) protects them from then on. The head record
``{"seq", "hash", "key", "keyed_from"}`` in the settings table is updated in the same transaction;
once the transaction commits, the :class:`~ongrid_skills.store.anchor.HeadAnchor` records the head
in ``$ONGRID_DATA_DIR/audit.head`` (and the optional sink), so deleting the newest entries, or all
of them, is detected too. :mod:`~ongrid_skills.store.auditverify` checks all of it.

This module never writes an entry outside the caller's transaction and never caches the head.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, select, text

from ongrid_skills.errors import ConfigError
from ongrid_skills.store.anchor import HeadAnchor, Link
from ongrid_skills.store.auditkey import Sealer, canonical, load_sealer
from ongrid_skills.store.auditsink import Witness, open_sink
from ongrid_skills.store.auditverify import GENESIS, Verification, verify_chain
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import AuditRow
from ongrid_skills.store.rawsql import dumps

__all__ = ["GENESIS", "HEAD_KEY", "AuditLog", "Verification", "entry_hash", "open_audit"]

HEAD_KEY = "audit_head"
_HEAD = text("SELECT value FROM settings WHERE key = :key")  # driver value: never a JSON error


def entry_hash(
    prev: str, seq: int, ts: float, actor: str, action: str, subject: str | None, data: Any
) -> str:
    """The plain SHA-256 of an entry: how entries were hashed before the chain was keyed."""
    body = canonical(seq, ts, actor, action, subject, data)
    return hashlib.sha256((prev + body).encode()).hexdigest()


def decode_head(value: Any) -> dict[str, Any] | None:
    """The head record's value (JSON text on SQLite; PostgreSQL drivers decode json)."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else None


class AuditLog:
    def __init__(self, db: Database, sealer: Sealer, anchor: HeadAnchor) -> None:
        self.db = db
        self.sealer = sealer
        self.anchor = anchor
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
        row = raw.one(conn, self._head_sql, (HEAD_KEY,))
        head = decode_head(row[0]) if row is not None else None
        if head is not None:
            prev_seq, prev = int(head["seq"]), str(head["hash"])
            keyed_from = head.get("keyed_from") if head.get("key") else None
        else:
            prev_seq, prev, keyed_from = 0, GENESIS, None
        seq = prev_seq + 1
        if keyed_from is None:
            keyed_from = seq  # the first keyed entry: its MAC covers the plain prefix before it
        ts = time.time()
        payload = data if data is not None else {}
        digest = self.sealer.seal(prev, canonical(seq, ts, actor, action, subject, payload))
        raw.run(
            conn,
            self._insert_sql,
            (seq, ts, actor, action, subject, dumps(payload), prev, digest),
        )
        record = dumps(
            {"seq": seq, "hash": digest, "key": self.sealer.key_id, "keyed_from": keyed_from}
        )
        if raw.run(conn, self._set_head_sql, (record, HEAD_KEY)).rowcount == 0:
            raw.run(conn, self._add_head_sql, (HEAD_KEY, record))
        self.db.after_commit(self.anchor.push, Link(seq, digest, prev))
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

    def verify(self, witnesses: Iterable[Witness] = ()) -> Verification:
        """Walk the chain and check it against its head record, the anchor and ``witnesses``."""
        self.db.flush()  # deferred entries are committed, then anchored, before we look
        self.anchor.flush()  # this process's own commits are anchored before we look
        return verify_chain(self.db, self.sealer, self.anchor.path, HEAD_KEY, witnesses)

    def close(self) -> None:
        self.db.flush()  # the deferred entries reach the chain before its last anchor
        self.anchor.close()


def open_audit(db: Database, data_dir: str, key_file: str | None, sink: str | None) -> AuditLog:
    """The audit log of ``db``: its key (checked against the chain's), anchor and sink."""
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    with db.read() as conn:
        value = conn.execute(_HEAD, {"key": HEAD_KEY}).scalar()
    try:  # a tampered head record is reported by verify; it must not stop the store opening
        head = decode_head(value) if value is not None else {}
    except ValueError:
        head = None
    chain_key = head.get("key") if head and isinstance(head.get("key"), str) else None
    # Unreadable: it may well be keyed, so a missing default key is not replaced either.
    sealer = load_sealer(key_file, data_dir, "unknown" if head is None else chain_key)
    if chain_key is not None and chain_key != sealer.key_id:
        raise ConfigError(
            f"the audit chain is keyed with key id {chain_key}, but {sealer.path} has key id "
            f"{sealer.key_id}: every process and replica on one store needs the same audit key "
            "(ONGRID_AUDIT_KEY_FILE)"
        )
    return AuditLog(db, sealer, HeadAnchor(data_dir, sealer.key_id, open_sink(sink)))
