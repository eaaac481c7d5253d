"""The head anchor: the newest committed audit entry, recorded outside the database.

``$ONGRID_DATA_DIR/audit.head`` holds one JSON object ``{"seq", "hash", "key"}`` (and, once seen,
``"diverged"``). It is written after each commit that appended entries, by one writer thread per
store (temp file + fsync + rename), so the committing request never waits for a disk flush;
consecutive commits coalesce into one write. The same thread feeds the optional external sink.

Invariants, and why:

- The anchor never goes backwards. Another process on the data dir (a CLI next to the server)
  anchors too; the file is re-read under an ``flock`` before each write and kept when it is
  ahead. An anchor ahead of the chain is exactly what a truncation looks like to ``verify``.
- A divergence is kept. When the chain is truncated and then grows again over the deleted seqs,
  the anchored seq comes back with another hash; blindly moving the anchor forward would erase
  the evidence. The writer compares the anchored hash with the hashes it is committing and, on a
  mismatch, records ``diverged`` in the file for good (``verify`` reports it until the operator
  removes the file after investigating).

This module never reads or writes the database and never raises into a committing transaction.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from ongrid_skills.store.auditsink import Sink, sink_line

LOG = logging.getLogger("ongrid_skills.audit")
ANCHOR_NAME = "audit.head"


@dataclass(frozen=True, slots=True)
class Link:
    """One committed entry: its seq, its hash and the hash before it."""

    seq: int
    hash: str
    prev: str


@dataclass(frozen=True, slots=True)
class Anchored:
    """The content of the anchor file."""

    seq: int
    hash: str
    key: str
    diverged: dict[str, Any] | None = None

    def to_json(self) -> str:
        body: dict[str, Any] = {"seq": self.seq, "hash": self.hash, "key": self.key}
        if self.diverged is not None:
            body["diverged"] = self.diverged
        return json.dumps(body, separators=(",", ":")) + "\n"


class AnchorUnreadable(ValueError):
    """The anchor file exists but does not hold an anchor."""


def read_anchor(path: str) -> Anchored | None:
    """The anchor at ``path``; None when there is no file."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(65536)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AnchorUnreadable(exc.strerror or str(exc)) from None
    try:
        body = json.loads(text)
        seq, digest, key = body["seq"], body["hash"], body.get("key", "")
        diverged = body.get("diverged")
        if not (isinstance(seq, int) and isinstance(digest, str) and isinstance(key, str)):
            raise TypeError
        if diverged is not None and not isinstance(diverged, dict):
            raise TypeError
    except (ValueError, TypeError, KeyError):
        raise AnchorUnreadable("not an anchor (expected {seq, hash, key})") from None
    return Anchored(seq, digest, key, diverged)


class HeadAnchor:
    """Writes the anchor (and the sink lines) for one store, from its own thread."""

    def __init__(self, data_dir: str, key_id: str, sink: Sink | None = None) -> None:
        self.path = os.path.join(data_dir, ANCHOR_NAME)
        self.key_id = key_id
        self.sink = sink
        self._cond = threading.Condition()
        self._queue: list[Link] = []
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None

    def push(self, links: list[Link]) -> None:
        """Queue committed entries (the hot path: no I/O here). Called in commit order."""
        with self._cond:
            if self._closed:
                LOG.error("audit entries %d..%d committed after close", links[0].seq, links[-1].seq)
                return
            self._queue.extend(links)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ongrid-audit-anchor", daemon=True
                )
                self._thread.start()
                atexit.register(self._at_exit)  # a CLI that never closes its store
            self._cond.notify()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued is written; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)
            atexit.unregister(self._at_exit)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if self.sink is not None:
            self.sink.close()
            self.sink = None

    def _at_exit(self) -> None:
        self.flush(timeout=5.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._closed)
                if not self._queue:
                    return  # closed and drained
                links, self._queue = self._queue, []
                self._busy = True
            try:
                self._write_sink(links)
                self._write_anchor(links)
            except Exception:  # the commit is done; say so loudly, keep anchoring later ones
                LOG.exception("could not anchor audit entries %d..%d", links[0].seq, links[-1].seq)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _write_sink(self, links: list[Link]) -> None:
        if self.sink is None:
            return
        try:
            self.sink.write([sink_line(link.seq, link.hash, self.key_id) for link in links])
        except OSError:
            LOG.exception("audit sink: entries %d..%d not written", links[0].seq, links[-1].seq)

    def _write_anchor(self, links: list[Link]) -> None:
        if self._lock_fd is None:
            self._lock_fd = os.open(
                self.path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            new = self._next(links)
            if new is not None:
                tmp = f"{self.path}.{os.getpid()}.tmp"  # one writer at a time: the flock
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
                try:
                    os.write(fd, new.to_json().encode())
                    os.fsync(fd)
                finally:
                    os.close(fd)
                # No fsync of the directory: a crash may bring the previous anchor back, which
                # is behind the chain (harmless), never ahead of it.
                os.replace(tmp, self.path)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _next(self, links: list[Link]) -> Anchored | None:
        """The anchor to write after ``links`` (in seq order), or None to keep the file."""
        try:
            current = read_anchor(self.path)
        except AnchorUnreadable as exc:
            LOG.error("audit head anchor %s unreadable (%s): writing a new one", self.path, exc)
            current = None
        newest = links[-1]
        if current is None:
            return Anchored(newest.seq, newest.hash, self.key_id)
        diverged = current.diverged
        if diverged is None:
            known = {link.seq - 1: link.prev for link in links}
            known.update((link.seq, link.hash) for link in links)
            found = known.get(current.seq)
            if found is not None and found != current.hash:
                diverged = {
                    "seq": current.seq,
                    "anchored": current.hash,
                    "found": found,
                    "ts": time.time(),
                }
                LOG.error(
                    "audit entry %d was anchored with another hash: the chain was truncated or "
                    "rewritten and has grown again; kept in %s, see `ongrid-skills audit verify`",
                    current.seq,
                    self.path,
                )
        if current.seq >= newest.seq and diverged is current.diverged:
            return None  # never backwards
        return Anchored(newest.seq, newest.hash, self.key_id, diverged)
