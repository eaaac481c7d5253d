"""WAL checkpoints in a thread of their own, on a real SQLite file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.store.checkpoint import BACKSTOP_PAGES, Checkpointer
from ongrid_skills.store.connection import Database
from tests.support.store import notes_database
from tests.support.waiting import wait_for


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = notes_database(tmp_path / "data")
    yield database
    database.close()


def write_notes(db: Database, first: int, count: int) -> None:
    for n in range(first, first + count):
        with db.tx() as conn:
            conn.exec_driver_sql("INSERT INTO notes (n, body) VALUES (?, ?)", (n, "x" * 3000))


def wal_frames(path: Path) -> tuple[int, int]:
    """(frames in the log, frames already copied back), as another process would see them."""
    with sqlite3.connect(path) as conn:
        _busy, logged, copied = conn.execute("PRAGMA wal_checkpoint(NOOP)").fetchone()
    return logged, copied


def test_the_store_checkpoints_itself_only_past_the_backstop(db: Database) -> None:
    with db.tx() as conn:
        pages = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    assert pages == BACKSTOP_PAGES


def test_commits_are_checkpointed_by_the_thread_not_by_the_committing_call(
    db: Database, tmp_path: Path
) -> None:
    checkpointer = db.checkpointer
    assert checkpointer is not None
    before = checkpointer.checkpoints
    write_notes(db, 0, checkpointer.every)
    wait_for(lambda: checkpointer.checkpoints > before, timeout=10, what="a checkpoint")
    logged, copied = wal_frames(tmp_path / "data" / "ongrid.db")
    assert logged > 0
    assert copied == logged  # everything written so far is in the database file


def test_closing_the_store_stops_the_thread(tmp_path: Path) -> None:
    database = notes_database(tmp_path / "data")
    assert database.checkpointer is not None
    write_notes(database, 0, database.checkpointer.every)
    database.close()
    assert not any(t.name == "ongrid-checkpoint" and t.is_alive() for t in threading.enumerate())


def test_a_failing_checkpoint_is_logged_and_never_reaches_a_commit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_database = tmp_path / "junk.db"
    not_a_database.write_bytes(b"this is not an SQLite file" * 200)
    checkpointer = Checkpointer(str(not_a_database), every=2)
    try:
        for _ in range(6):
            checkpointer.committed()  # never raises
        wait_for(lambda: "WAL checkpoint of" in caplog.text, timeout=10, what="the failure logged")
        assert checkpointer.checkpoints == 0
    finally:
        checkpointer.close()
