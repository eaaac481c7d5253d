"""The worker's ledger of the calls it took: the reason a call never runs twice on a host.

One SQLite file in the worker's state dir (``$ONGRID_DATA_DIR/worker-calls.sqlite``). A call is
written here (its id and nonce, both unique) and committed with ``synchronous=FULL`` *before* its
message is acknowledged and before it is spawned. So whatever happens next — the acknowledgement
lost in a bus outage and the message redelivered, the worker restarted, the same signed bytes
published again by someone who copied them — the second delivery finds the row and is refused.
Rows are kept a day, and at least until the call's expiry has passed (after that the expiry
check refuses the message anyway).

A call taken but never finished (the worker died while it ran) is marked ``interrupted`` at the
next start: it is never run again, whatever its class. This module never runs anything.
"""

from __future__ import annotations

import os
import sqlite3
import threading

from ongrid_skills.fleet.signing import CLOCK_SKEW_SECONDS, Call

FILE_NAME = "worker-calls.sqlite"
RETENTION_SECONDS = 24 * 3600.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS taken (
    call_id TEXT PRIMARY KEY,
    nonce TEXT NOT NULL UNIQUE,
    skill TEXT NOT NULL,
    expires_at REAL NOT NULL,
    taken_at REAL NOT NULL,
    status TEXT
)
"""


class Ledger:
    """The calls this host took, in a SQLite file (one writer: the worker process)."""

    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        self.path = os.path.join(state_dir, FILE_NAME)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_SCHEMA)

    def seen(self, call: Call) -> str | None:
        """Why this call was seen before (its id or its nonce), or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT call_id, nonce FROM taken WHERE call_id = ? OR nonce = ? LIMIT 1",
                (call.id, call.nonce),
            ).fetchone()
        if row is None:
            return None
        if row[1] == call.nonce:
            return "this nonce was already used: a copy of a call is never run"
        return "this call was already taken on this host: it never runs twice"

    def take(self, call: Call, now: float) -> str | None:
        """Record the call as taken (committed); None when it is new, else why not."""
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO taken (call_id, nonce, skill, expires_at, taken_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (call.id, call.nonce, call.skill, call.expires_at, now),
                )
            except sqlite3.IntegrityError:
                return "this call or its nonce was taken meanwhile: it never runs twice"
        return None

    def finish(self, call_id: str, status: str) -> None:
        """Record how a taken call ended, without waiting for the disk: only :meth:`take`
        must be durable (it is what refuses a second run). A finish lost in a power cut leaves
        the call unfinished here, so the next start marks it ``interrupted``: never run again
        either way. It reaches the disk with the next take's commit (WAL) or a checkpoint.
        Waiting for it (``synchronous=FULL``) cost 1.9 ms on every remote call's path
        (bench/README.md, fleet)."""
        with self._lock:
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                self._db.execute("UPDATE taken SET status = ? WHERE call_id = ?", (status, call_id))
            finally:
                self._db.execute("PRAGMA synchronous=FULL")

    @property
    def synchronous(self) -> int:
        """The connection's ``synchronous`` level now (2: FULL, what a take commits with)."""
        with self._lock:
            return int(self._db.execute("PRAGMA synchronous").fetchone()[0])

    def interrupt_unfinished(self) -> list[tuple[str, str]]:
        """Mark the calls a previous run of the worker took and never finished; (id, skill)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT call_id, skill FROM taken WHERE status IS NULL ORDER BY taken_at"
            ).fetchall()
            self._db.execute("UPDATE taken SET status = 'interrupted' WHERE status IS NULL")
        return [(str(call_id), str(skill)) for call_id, skill in rows]

    def prune(self, now: float) -> int:
        """Forget rows older than the retention whose expiry is long past; how many."""
        horizon = now - max(RETENTION_SECONDS, CLOCK_SKEW_SECONDS)
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM taken WHERE taken_at < ? AND expires_at < ? AND status IS NOT NULL",
                (horizon, now - CLOCK_SKEW_SECONDS),
            )
        return cursor.rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()
