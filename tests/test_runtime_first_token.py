"""The first admin token when replicas start together on an empty PostgreSQL database.

Each round creates an empty database, holds the writers' advisory lock (the one every migration
and write transaction of the store takes) until every replica of the round is waiting on it, then
lets go: the replicas migrate one after the other and reach their first-start check together,
which is where an unserialised check-then-create used to mint one admin token per replica (or
kill the replica that lost a unique-name race).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from ongrid_skills.store import open_store
from ongrid_skills.store.connection import WRITER_LOCK
from ongrid_skills.store.tokens import TokenInfo
from tests.support.postgres import Postgres
from tests.support.server import ServeProcess, start_serve, stop, stop_all
from tests.support.waiting import wait_for

ROUNDS = 2  # the race showed in the first round of every run before the fix
REPLICAS = 3
FIRST_START = "ongrid-skills: first start, admin token"


@contextmanager
def writers_held(dsn: str) -> Iterator[psycopg.Connection[tuple[int]]]:
    """The database's writer lock, held by this test until the block ends."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SELECT pg_advisory_lock({WRITER_LOCK})")
        try:
            yield conn
        finally:
            conn.execute(f"SELECT pg_advisory_unlock({WRITER_LOCK})")


def waiting_for_writers(conn: psycopg.Connection[tuple[int]]) -> int:
    """How many sessions of this database wait for the writer lock."""
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND "
        "database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchone()
    assert row is not None
    return row[0]


def start_together(base: Path, env: dict[str, str], dsn: str) -> list[ServeProcess]:
    """REPLICAS `serve` processes (a data dir each, as on separate hosts) released at once."""
    started: list[ServeProcess | BaseException] = []
    lock = threading.Lock()

    def start(name: str) -> None:
        try:
            process: ServeProcess | BaseException = start_serve(base / name, env, timeout=60)
        except BaseException as exc:  # reported by the test below
            process = exc
        with lock:
            started.append(process)

    threads = [threading.Thread(target=start, args=(f"r{i}",)) for i in range(REPLICAS)]
    with writers_held(dsn) as conn:
        for thread in threads:
            thread.start()
        wait_for(
            lambda: waiting_for_writers(conn) == REPLICAS,
            f"{REPLICAS} replicas to wait for the writer lock",
            60,
        )
    for thread in threads:
        thread.join(timeout=90)
    failed = [p for p in started if isinstance(p, BaseException)]
    processes = [p for p in started if isinstance(p, ServeProcess)]
    if failed:
        for process in processes:
            stop(process)
        raise AssertionError(f"a replica did not come up: {failed!r}")
    return processes


def test_replicas_starting_together_on_an_empty_database_make_one_first_admin_token(
    postgres: Postgres, tmp_path: Path, skills_root: Path
) -> None:
    key = tmp_path / "audit.key"
    key.write_text("5e" * 32 + "\n")
    key.chmod(0o600)
    for round_ in range(ROUNDS):
        url = postgres.fresh_database()
        base = tmp_path / f"round{round_}"
        env = {
            "ONGRID_DATABASE_URL": url,
            "ONGRID_AUDIT_KEY_FILE": str(key),
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root),
        }
        processes = start_together(base, env, postgres.dsn(url.rsplit("/", 1)[1]))
        # Every replica answered /v1/health (start_serve waited for it); stop them and read on.
        said = stop_all(processes)
        announced = [line for text in said for line in text.splitlines() if FIRST_START in line]
        files = sorted(base.glob("*/first-admin-token"))
        store = open_store(str(base / "test"), url, audit_key_file=str(key))
        try:
            admins: list[TokenInfo] = [
                t for t in store.tokens.all() if t.name == "admin" and t.revoked_at is None
            ]
            made = store.audit.entries(action="token.created")
            verified = store.audit.verify().ok
        finally:
            store.close()
        assert len(admins) == 1, f"round {round_}: {admins}"
        assert len(made) == 1, f"round {round_}: {made}"
        assert verified, f"round {round_}"
        assert len(announced) == 1, f"round {round_}: {said}"
        assert len(files) == 1, f"round {round_}: {files}"
        assert all(process.proc.returncode == 0 for process in processes), said
