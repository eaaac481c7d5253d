"""WAL checkpoints of the embedded SQLite database, off the request path.

SQLite copies its write-ahead log back into the database file (a *checkpoint*) from inside the
commit that makes the log pass ``wal_autocheckpoint`` pages (1,000 by default). That commit then
takes 3-4 ms instead of about 0.02 ms here (it copies the pages and waits for an fsync), one
commit in fifty under REST load: about 50 µs per commit on average, spent on the event loop, and
a stall of every request in flight each time.

Here each commit of the store tells the :class:`Checkpointer`; after :data:`EVERY` commits its
thread, on a connection of its own, runs a passive checkpoint (which never blocks a writer or a
reader, and releases the GIL while SQLite copies and syncs). The store's own connections keep an
automatic checkpoint at :data:`BACKSTOP_PAGES` pages only as a backstop, for a log this thread
could not keep short (a reader holding an old snapshot for long). Every process that opens the
store this way (the server, a CLI command next to it) does the same; other programs on the file
(the ``sqlite3`` shell) keep SQLite's default. A failed checkpoint is logged and tried again after
the next commits; it never reaches a commit.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

LOG = logging.getLogger("ongrid_skills.store")
EVERY = 32  # commits between two checkpoints of the thread (a few hundred pages here)
BACKSTOP_PAGES = 10_000  # the store's connections checkpoint themselves past this (40 MiB)


class Checkpointer:
    """Passive checkpoints of one SQLite file in a thread, every ``every`` commits."""

    def __init__(self, path: str, every: int = EVERY) -> None:
        self.path = path
        self.every = every
        self.checkpoints = 0  # completed by the thread (for tests and diagnostics)
        self._commits = 0
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def committed(self) -> None:
        """One more commit (called under the store's write lock: cheap, never blocks)."""
        self._commits += 1
        if self._commits < self.every:
            return
        self._commits = 0
        if self._thread is None:
            with self._lock:
                if self._closed or self._thread is not None:
                    return
                self._thread = threading.Thread(
                    target=self._run, name="ongrid-checkpoint", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        """Stop the thread (its connection is closed; a checkpoint under way finishes)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closed:
                    return
                try:
                    if conn is None:
                        conn = sqlite3.connect(self.path, timeout=5, isolation_level=None)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except Exception as exc:  # the thread must outlive any one failure
                    LOG.warning("WAL checkpoint of %s failed (retried later): %s", self.path, exc)
        finally:
            if conn is not None:
                conn.close()


__all__ = ["BACKSTOP_PAGES", "EVERY", "Checkpointer"]
