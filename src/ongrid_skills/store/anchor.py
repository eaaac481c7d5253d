"""The head anchor: the newest committed audit entry, recorded outside the database.

``$ONGRID_DATA_DIR/audit.head`` holds one JSON object ``{"seq", "hash", "key"}`` (and, once seen,
``"diverged"``). It is written after each commit that appended entries, by one writer thread per
store (temp file + fsync + rename), so the committing request never waits for a disk flush. The
writer writes at most once per :data:`MIN_INTERVAL`; commits in between coalesce into one write
(an fsync on every commit cost ~0.9 ms of server CPU and 2-6 ms of p50 per REST execute here).
The anchor thus lags the chain by at most that interval plus one write; it is built from the
committed values kept in memory, never re-read from the database, so tampering inside that window
is still caught unless the process dies in it. The same thread feeds the optional external sink,
every entry, in commit order.

Invariants, and why:

- The anchor never goes backwards. Another process on the data dir (a CLI next to the server)
  anchors too; the file is re-read under an ``flock`` before each write and kept when it is
  ahead. An anchor ahead of the chain is exactly what a truncation looks like to ``verify``.
- A divergence is kept. When the chain is truncated and then grows again over the deleted seqs,
  the deleted seqs come back with other hashes; blindly moving the anchor forward would erase the
  evidence. The writer checks each commit against the previous one of this process (a seq that
  goes back, or a direct successor linking to another hash) and the anchored hash against the
  hashes being committed; on a mismatch it records ``diverged`` in the file for good (``verify``
  reports it until the operator moves the file aside after investigating).

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
MIN_INTERVAL = 0.05  # seconds between two anchor writes


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

    def __init__(
        self, data_dir: str, key_id: str, sink: Sink | None = None, interval: float = MIN_INTERVAL
    ) -> None:
        self.path = os.path.join(data_dir, ANCHOR_NAME)
        self.key_id = key_id
        self.sink = sink
        self.interval = interval
        self._cond = threading.Condition()
        self._queue: list[Link] = []
        self._busy = False
        self._closed = False
        self._flushing = 0  # callers waiting in flush(): the interval is skipped for them
        self._due = 0.0  # monotonic time before which the writer waits to coalesce
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None
        self._last: Link | None = None  # the newest entry this process committed (writer only)

    def push(self, links: list[Link]) -> None:
        """Queue committed entries (the hot path: no I/O here). Called in commit order."""
        with self._cond:
            if self._closed:
                LOG.error("audit entries %d..%d committed after close", links[0].seq, links[-1].seq)
                return
            idle = not self._queue  # else the writer is already due to run: no wake-up
            self._queue.extend(links)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ongrid-audit-anchor", daemon=True
                )
                self._thread.start()
                atexit.register(self._at_exit)  # a CLI that never closes its store
            if idle:
                self._cond.notify()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued is written; False on timeout."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)
            finally:
                self._flushing -= 1

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
                while not (self._closed or self._flushing):
                    left = self._due - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)  # more commits may arrive: one write for them all
                links, self._queue = self._queue, []
                self._busy = True
            try:
                self._write_sink(links)
                self._write_anchor(links)
            except Exception:  # the commit is done; say so loudly, keep anchoring later ones
                LOG.exception("could not anchor audit entries %d..%d", links[0].seq, links[-1].seq)
            finally:
                with self._cond:
                    self._due = time.monotonic() + self.interval
                    self._busy = False
                    self._cond.notify_all()

    def _write_sink(self, links: list[Link]) -> None:
        if self.sink is None:
            return
        try:
            self.sink.write([sink_line(link.seq, link.hash, self.key_id) for link in links])
        except Exception:  # the anchor is written all the same
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
        """The anchor to write after ``links`` (in commit order), or None to keep the file."""
        try:
            current = read_anchor(self.path)
        except AnchorUnreadable as exc:
            LOG.error("audit head anchor %s unreadable (%s): writing a new one", self.path, exc)
            current = None
        kept = current.diverged if current is not None else None
        diverged = kept
        for link in links:
            broken = self._follow(link)
            diverged = diverged or broken
        if diverged is None and current is not None:
            known = {link.seq - 1: link.prev for link in links}
            known.update((link.seq, link.hash) for link in links)
            found = known.get(current.seq)
            if found is not None and found != current.hash:
                diverged = _divergence(
                    current.seq,
                    f"entry {current.seq} was anchored with hash {current.hash[:16]}… and "
                    f"committed again later with hash {found[:16]}…",
                )
        if diverged is not kept:
            LOG.error(
                "the audit chain was truncated or rewritten, then grew again (%s); kept in %s, "
                "see `ongrid-skills audit verify`",
                diverged,
                self.path,
            )
        newest = links[-1]
        if current is not None and current.seq >= newest.seq and diverged is kept:
            return None  # never backwards
        return Anchored(newest.seq, newest.hash, self.key_id, diverged)

    def _follow(self, link: Link) -> dict[str, Any] | None:
        """Check ``link`` against the previous entry this process committed.

        Seqs are global and only grow, so a commit of ours never has a seq at or below an
        earlier one of ours unless entries were deleted in between; and when it directly
        follows ours, nobody else committed in between, so it must link to our hash.
        """
        last, self._last = self._last, link
        if last is None or link.seq > last.seq + 1:
            return None
        if link.seq <= last.seq:
            return _divergence(
                link.seq,
                f"entry {link.seq} was committed again after entry {last.seq}: entries "
                f"{link.seq}..{last.seq} had been deleted",
            )
        if link.prev != last.hash:
            return _divergence(
                last.seq,
                f"entry {last.seq} changed after it was committed (entry {link.seq} "
                "links to another hash)",
            )
        return None


def _divergence(seq: int, detail: str) -> dict[str, Any]:
    return {"seq": seq, "detail": detail, "ts": time.time()}
