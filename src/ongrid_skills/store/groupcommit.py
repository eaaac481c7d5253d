"""Group commit: the writes of many calls' outcomes, batched into one transaction by a writer.

What a call records after it ran (its outcome, its last events, the audit entry) is queued with
:meth:`GroupCommit.defer`; a writer thread commits everything queued in one transaction. It
does not wait for more writes (``delay`` is 0 by default): the writes that arrive while one
batch commits form the next, so a lone call pays one commit and 32 concurrent calls share a
few, and the commit runs while the event loop waits for children (SQLite releases the GIL while
it works) instead of in the loop.

On SQLite (``inline``), a write that finds the writer idle — nothing queued, no batch
committing, the database lock free — is committed at once in the caller's thread instead: a
local commit takes about 0.2 ms, and handing it to the writer thread and waking the caller's
event loop afterwards added about 0.15 ms to every call that ran alone. Batches still form
whenever writes arrive while one commits. PostgreSQL always uses the writer (a commit there is
a network round trip the event loop must not wait for).

The caller waits for its write to be *settled* (the future :meth:`defer` returns) before it
answers: an outcome a client was given is committed, so a manager killed right after answering
never leaves the call ``running`` and then ``interrupted`` against what the client saw.

Read-your-writes within the process: :meth:`flush` commits what is queued, and
:class:`~ongrid_skills.store.connection.Database` calls it before every read.

Failures: a batch that fails is retried one write per transaction, so one bad write cannot take
the others down; a write that fails alone is logged and dropped (its future settles all the
same: the call ran, its caller gets its outcome). On a full disk
(:class:`~ongrid_skills.errors.StorageFull`) the writes stay queued and are retried with a
growing delay, so an outcome is never lost once space comes back; their futures settle at once,
so no caller hangs on a full disk.

It must never run a write outside a transaction of :meth:`Database.tx`, nor commit writes out of
the order they were queued in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager

from sqlalchemy import Connection

from ongrid_skills.errors import StorageFull

LOG = logging.getLogger("ongrid_skills.store")
Write = Callable[[Connection], None]
DELAY_SECONDS = 0.0  # how long the writer waits for more writes before it commits
MAX_RETRY_SECONDS = 30.0


class GroupCommit:
    """The deferred writes of one database and the thread that commits them."""

    def __init__(
        self,
        tx: Callable[[], AbstractContextManager[Connection]],
        lock: threading.RLock,
        delay: float = DELAY_SECONDS,
        inline: bool = False,
        tx_open: Callable[[], bool] = lambda: False,
    ) -> None:
        self._tx = tx
        self.inline = inline
        self._tx_open = tx_open  # whether a transaction is open (asked under the lock)
        self._lock = lock  # the database's writer lock: held while a batch commits
        self.delay = delay
        self._cond = threading.Condition()
        self._queue: list[tuple[Write, Future[None]]] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self._retry = 0.0  # > 0 after a full disk: the wait before the next attempt
        self._committing: int | None = None  # the thread committing a batch now

    @property
    def pending(self) -> int:
        """How many writes are queued (not counting a batch being committed)."""
        return len(self._queue)

    def defer(self, write: Write) -> Future[None]:
        """Queue ``write`` (called with the connection of a write transaction, soon); the
        future settles once it is committed, dropped after a failure, or parked on a full disk.

        With ``inline`` set and no delay, a write that finds the writer idle (nothing queued,
        no batch committing, the database lock free) is committed here, in the caller's
        thread, and the future returned is settled already."""
        settled: Future[None] = Future()
        if self._idle() and self._lock.acquire(blocking=False):
            try:
                if self._idle() and not self._tx_open():  # not nested in this thread's own
                    with self._cond:
                        self._queue.append((write, settled))
                    self._commit_queued()  # that write alone: nothing else was queued
                    return settled
            finally:
                self._lock.release()
        with self._cond:
            if self._closed:
                raise RuntimeError("the store is closed")
            self._queue.append((write, settled))
            self._start_writer()
            if len(self._queue) == 1:
                self._cond.notify()
        return settled

    def _idle(self) -> bool:
        """Whether a write may be committed inline now (see :meth:`defer`)."""
        return (
            self.inline
            and self.delay <= 0
            and not self._queue
            and self._committing is None
            and not self._closed  # a closed store refuses the write (below), never commits it
        )

    def _start_writer(self) -> None:
        """Under ``_cond``: the writer thread, started on first use."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="ongrid-group-commit", daemon=True
            )
            self._thread.start()

    def flush(self) -> None:
        """Commit every queued write now, in this thread (a no-op inside a batch's own writes).

        A full disk leaves the writes queued for the writer's retries; the caller reads what
        is committed."""
        if not self._queue and self._committing is None:
            return
        if self._committing == threading.get_ident():
            return  # a write of the batch reads: its own transaction sees its writes
        with self._lock:  # waits for a batch another thread is committing
            self._commit_queued()

    def close(self) -> None:
        """Commit what is queued and stop the writer."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=MAX_RETRY_SECONDS)
        with self._lock:
            self._commit_queued()

    # ---- the writer -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                pause = self._retry or self.delay
                if pause > 0:  # let more writes arrive (after a full disk: wait for space)
                    self._cond.wait(pause)
                    if self._closed:
                        return
            with self._lock:
                self._commit_queued()

    def _commit_queued(self) -> None:
        """Under the database lock: commit the queue, one batch, falling back to one write per
        transaction when the batch fails."""
        # Marked busy before the queue is emptied: a reader's flush() that finds the queue
        # empty must still wait for this batch (see flush's check without the lock).
        self._committing = threading.get_ident()
        with self._cond:
            batch, self._queue = self._queue, []
        if not batch:
            self._committing = None
            return
        try:
            try:
                self._commit([write for write, _settled in batch])
            except StorageFull:
                self._requeue(batch)
                return
            except Exception:
                if len(batch) == 1:  # nothing else to save from it
                    LOG.exception("a deferred write failed and was dropped")
                    return
                LOG.warning("a batch of %d writes failed: retrying one by one", len(batch))
                for index, (write, _settled) in enumerate(batch):
                    try:
                        self._commit([write])
                    except StorageFull:
                        self._requeue(batch[index:])
                        return
                    except Exception:
                        LOG.exception("a deferred write failed and was dropped")
            self._retry = 0.0
        finally:
            self._committing = None
            for _write, settled in batch:
                if not settled.done():  # a requeued write's future settled already
                    settled.set_result(None)

    def _commit(self, batch: list[Write]) -> None:
        with self._tx() as conn:
            for write in batch:
                write(conn)

    def _requeue(self, batch: list[tuple[Write, Future[None]]]) -> None:
        """Park ``batch`` at the head of the queue for the writer's retries (it is started if
        an inline commit was the first to meet the full disk)."""
        self._retry = min(max(self._retry * 2, 1.0), MAX_RETRY_SECONDS)
        LOG.error("%d deferred writes wait for space in the store", len(batch))
        with self._cond:
            self._queue[:0] = batch  # before anything queued since: the order holds
            if not self._closed:
                self._start_writer()
                self._cond.notify()


__all__ = ["DELAY_SECONDS", "GroupCommit", "Write"]
