"""Group commit on a real SQLite file: deferred writes, read-your-writes, failures, close."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from ongrid_skills.errors import StorageFull
from ongrid_skills.store.connection import Database
from ongrid_skills.store.groupcommit import Write
from tests.support.store import notes_database
from tests.support.waiting import wait_for


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = notes_database(tmp_path / "data")
    yield database
    database.close()


def note(n: int) -> Write:
    """A deferred write adding the note ``n``."""

    def write(conn: Connection) -> None:
        conn.exec_driver_sql("INSERT INTO notes (n, tx) VALUES (?, 0)", (n,))

    return write


def notes(db: Database) -> list[int]:
    with db.read() as conn:
        return [row[0] for row in conn.execute(text("SELECT n FROM notes ORDER BY n"))]


def committed_elsewhere(path: Path) -> list[int]:
    """What another process would see: a plain sqlite3 connection, no flush."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT n FROM notes ORDER BY n")]


def test_deferred_writes_are_committed_soon_without_anyone_asking(
    db: Database, tmp_path: Path
) -> None:
    for n in range(5):
        db.defer(note(n))
    wait_for(
        lambda: committed_elsewhere(tmp_path / "data" / "ongrid.db") == [0, 1, 2, 3, 4],
        timeout=5,
        what="the writer thread to commit",
    )


def test_many_writes_deferred_together_share_one_transaction(db: Database) -> None:
    transactions = 0
    real_tx = db.tx

    def counting_tx() -> Any:
        nonlocal transactions
        transactions += 1
        return real_tx()

    db.group.delay = 60.0  # only the flush below commits
    db.group._tx = counting_tx  # type: ignore[assignment]
    for n in range(50):
        db.defer(note(n))
    db.flush()
    assert notes(db) == list(range(50))
    assert transactions == 1


def test_a_read_sees_every_write_deferred_before_it(db: Database) -> None:
    db.group.delay = 60.0  # the writer would wait a minute: only the read can commit them
    for n in range(3):
        db.defer(note(n))
    assert notes(db) == [0, 1, 2]
    assert db.group.pending == 0


def test_a_failing_write_is_dropped_alone_and_the_others_are_committed(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(conn: Connection) -> None:
        conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")

    db.group.delay = 60.0
    db.defer(note(1))
    db.defer(broken)
    db.defer(note(2))
    assert notes(db) == [1, 2]
    assert "a deferred write failed and was dropped" in caplog.text


def test_on_a_full_disk_the_writes_stay_queued_in_order_and_are_retried(db: Database) -> None:
    full = threading.Event()
    full.set()

    def maybe_full(conn: Connection) -> None:
        if full.is_set():
            raise StorageFull("the data store's filesystem is full: nothing was written")
        conn.exec_driver_sql("INSERT INTO notes (n, tx) VALUES (0, 0)")

    db.group.delay = 60.0
    db.defer(maybe_full)
    db.defer(note(1))
    assert notes(db) == []  # the batch rolled back whole, and stays queued
    assert db.group.pending == 2
    full.clear()
    assert notes(db) == [0, 1]


def test_closing_commits_what_is_still_queued(tmp_path: Path) -> None:
    database = notes_database(tmp_path / "data")
    database.group.delay = 60.0
    database.defer(note(7))
    database.close()
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [7]
    with pytest.raises(RuntimeError, match="closed"):
        database.defer(note(8))


def test_a_closed_store_refuses_a_write_even_when_it_could_be_committed_inline(
    tmp_path: Path,
) -> None:
    """Nothing may write after close (the data dir may be someone else's by then), and no
    connection may be opened again behind the closed store's back."""
    database = notes_database(tmp_path / "data")
    database.close()
    with pytest.raises(RuntimeError, match="closed"):
        database.defer(note(8))
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == []


def test_a_deferred_write_settles_its_future_once_committed_and_not_before(
    db: Database, tmp_path: Path
) -> None:
    db.group.delay = 60.0  # held: nothing commits until the flush
    settled = db.defer(note(3))
    assert not settled.done()
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == []
    db.flush()
    settled.result(timeout=5)
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [3]


def test_without_a_delay_the_writer_commits_at_once_and_settles_the_future(
    db: Database, tmp_path: Path
) -> None:
    db.defer(note(4)).result(timeout=5)  # nobody flushes: the writer thread does it
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [4]


def test_dropped_and_parked_writes_settle_their_futures_so_no_caller_hangs(db: Database) -> None:
    def broken(conn: Connection) -> None:
        conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")

    def full(conn: Connection) -> None:
        raise StorageFull("the data store's filesystem is full: nothing was written")

    db.group.delay = 60.0
    dropped = db.defer(broken)
    db.flush()
    dropped.result(timeout=5)
    parked = db.defer(full)
    db.flush()
    parked.result(timeout=5)
    assert db.group.pending == 1  # still queued for the retries


def test_a_write_deferred_while_the_writer_is_idle_is_committed_before_defer_returns(
    db: Database, tmp_path: Path
) -> None:
    # SQLite, no delay, nothing queued: committed in the caller's thread, no hand-off.
    settled = db.defer(note(5))
    assert settled.done()
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [5]


def test_writes_deferred_while_another_thread_writes_are_queued_and_committed_in_order(
    db: Database, tmp_path: Path
) -> None:
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.tx() as conn:  # another thread's transaction holds the database lock
            conn.exec_driver_sql("INSERT INTO notes (n, tx) VALUES (0, 0)")
            held.set()
            release.wait(5)

    thread = threading.Thread(target=writer)
    thread.start()
    assert held.wait(5)
    first, second = db.defer(note(1)), db.defer(note(2))
    assert not first.done() and not second.done()  # queued for the writer thread
    release.set()
    thread.join(5)
    second.result(timeout=5)
    assert first.done()
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [0, 1, 2]


def test_a_write_that_finds_a_full_disk_inline_is_parked_for_the_writer_and_settled(
    db: Database, tmp_path: Path
) -> None:
    full = threading.Event()
    full.set()

    def maybe_full(conn: Connection) -> None:
        if full.is_set():
            raise StorageFull("the data store's filesystem is full: nothing was written")
        conn.exec_driver_sql("INSERT INTO notes (n, tx) VALUES (9, 0)")

    parked = db.defer(maybe_full)
    assert parked.done()  # nobody waits on a full disk
    assert db.group.pending == 1
    later = db.defer(note(10))  # queued behind it, not committed before it
    assert not later.done()
    full.clear()  # space again: the writer's retry (after 1 s) commits both, in order
    later.result(timeout=10)
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [9, 10]


def test_a_write_failing_inline_is_dropped_alone_and_logged(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(conn: Connection) -> None:
        conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")

    assert db.defer(broken).done()
    assert db.defer(note(11)).done()
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [11]
    assert "a deferred write failed and was dropped" in caplog.text


def test_a_write_deferred_inside_a_transaction_waits_for_it_instead_of_nesting(
    db: Database, tmp_path: Path
) -> None:
    with db.tx() as conn:
        conn.exec_driver_sql("INSERT INTO notes (n, tx) VALUES (12, 0)")
        settled = db.defer(note(13))
        assert not settled.done()
    settled.result(timeout=5)
    assert committed_elsewhere(tmp_path / "data" / "ongrid.db") == [12, 13]
