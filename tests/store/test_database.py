"""The database: schema from migrations, SQLite in WAL mode, persistence across re-opening."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError

from ongrid_skills.execution.records import Execution
from ongrid_skills.store import connection, open_store
from ongrid_skills.store.connection import MIGRATIONS
from ongrid_skills.store.models import Base
from ongrid_skills.types import Role
from tests.support.migrations import head_revision, migration_heads
from tests.support.server import make_settings, running_app
from tests.support.skills import MakeSkill


def test_migrations_create_exactly_the_schema_of_the_models(
    tmp_path: Path, database_url: str | None
) -> None:
    store = open_store(str(tmp_path / "data"), database_url)
    try:
        with store.engine.connect() as conn:
            context = MigrationContext.configure(conn)
            differences = compare_metadata(context, Base.metadata)
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        store.close()

    assert differences == []
    assert version == head_revision()


def test_opening_a_migrated_store_again_migrates_nothing_and_keeps_one_version(
    tmp_path: Path,
) -> None:
    for _ in range(2):
        open_store(str(tmp_path / "data")).close()

    conn = sqlite3.connect(tmp_path / "data" / "ongrid.db")
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (head_revision(),)
        ]
    finally:
        conn.close()


def test_the_embedded_store_is_sqlite_in_wal_mode_inside_the_data_dir(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        with store.engine.connect() as conn:
            mode = conn.execute(text("PRAGMA journal_mode")).scalar()
            keys = conn.execute(text("PRAGMA foreign_keys")).scalar()
    finally:
        store.close()
    assert store.dialect == "sqlite"
    assert mode == "wal"
    assert keys == 1
    raw = sqlite3.connect(tmp_path / "data" / "ongrid.db")  # WAL is a property of the file
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        raw.close()
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700


ECHO = "#!/bin/sh\ncat\n"


def test_reopening_a_data_dir_keeps_executions_approvals_tokens_and_the_audit_chain(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    make_skill("peek", ECHO)
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    settings = make_settings(tmp_path, skills_root)
    with running_app(settings) as server:
        ran = server.call("POST", "/v1/skills/peek/execute", "olga", json={"args": {"x": 1}})
        assert ran.status_code == 200, ran.text
        pending = server.call("POST", "/v1/skills/set_flag/execute", "olga", json={"args": {}})
        assert pending.status_code == 202, pending.text
        olga = server.tokens["olga"]
        entries = server.store.audit.verify().entries

    store = open_store(settings.data_dir)
    try:
        execution = store.executions.get(ran.json()["id"])
        assert execution is not None
        assert execution.status.value == "succeeded"
        assert execution.args == {"x": 1}
        assert execution.result == {"x": 1}
        assert [e.type for _seq, e in store.executions.events(execution.id)] == [
            "status",
            "status",
        ]
        approvals = store.approvals.with_status("pending")
        assert [a.id for a in approvals] == [pending.json()["approval_id"]]
        assert approvals[0].args == {}
        found = store.tokens.lookup(olga)
        assert found is not None
        assert (found.name, found.role) == ("olga", Role.OPERATOR)
        assert store.audit.verify().to_dict() == {
            "ok": True,
            "entries": entries,
            "problems": [],
            "first_broken": None,
            "keyed_from": 1,
            "anchor": entries,
            "warnings": [],
        }
        # the chain goes on from where it stopped
        with store.tx() as conn:
            seq = store.audit.append(conn, "test", "test.appended", None, {"n": 1})
        assert seq == entries + 1
        assert store.audit.verify().ok
    finally:
        store.close()


def test_stores_opened_at_once_on_a_new_database_migrate_it_once(
    tmp_path: Path, database_url: str | None
) -> None:
    """Replicas starting together on an empty database: each one migrates, one after the other."""
    barrier = threading.Barrier(3)
    failures: list[BaseException] = []

    def start(n: int) -> None:
        barrier.wait()
        try:
            # One data dir on SQLite (the database is in it); one each on PostgreSQL.
            data = tmp_path / ("data" if database_url is None else f"data{n}")
            open_store(str(data), database_url, audit_key_file=str(key)).close()
        except BaseException as exc:
            failures.append(exc)

    key = tmp_path / "audit.key"
    key.write_text("ab" * 32 + "\n")
    key.chmod(0o600)
    threads = [threading.Thread(target=start, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    store = open_store(str(tmp_path / "data"), database_url, audit_key_file=str(key))
    with closing(store), store.read() as conn:
        versions = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    assert versions == [(head_revision(),)]


def test_two_stores_appending_at_once_keep_one_valid_audit_chain(
    tmp_path: Path, database_url: str | None
) -> None:
    """Two processes (or replicas) on one database, writing at the same moment, from an empty
    chain: every entry gets its own seq after the one before, and the chain verifies."""
    key = tmp_path / "audit.key"
    key.write_text("cd" * 32 + "\n")
    key.chmod(0o600)
    dirs = ["data", "data"] if database_url is None else ["data-a", "data-b"]
    stores = [open_store(str(tmp_path / d), database_url, audit_key_file=str(key)) for d in dirs]
    barrier = threading.Barrier(len(stores))
    failures: list[BaseException] = []
    per_store = 60

    def write(n: int) -> None:
        store = stores[n]
        barrier.wait()
        try:
            for i in range(per_store):
                with store.tx() as conn:
                    store.audit.append(conn, f"writer{n}", "test.burst", None, {"i": i})
        except BaseException as exc:
            failures.append(exc)

    try:
        threads = [threading.Thread(target=write, args=(n,)) for n in range(len(stores))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failures == []
        for store in stores:
            verification = store.audit.verify()
            assert verification.ok, verification.to_dict()
            assert verification.entries == per_store * len(stores)
        seqs = [e["seq"] for e in stores[0].audit.entries(limit=1000)]
        assert sorted(seqs) == list(range(1, per_store * len(stores) + 1))
    finally:
        for store in stores:
            store.close()


def test_a_store_at_0003_is_upgraded_to_replica_leases_keeping_its_rows(
    tmp_path: Path, database_url: str | None
) -> None:
    """Every migration runs on both engines: here 0001..0003 first, then the rest on open."""
    data = tmp_path / "data"
    url = connection.database_url(str(data), database_url)
    engine = create_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        conn.execute(
            text(
                "INSERT INTO executions (id, skill, status, args, stderr_tail, orphans_killed,"
                " created_at) VALUES ('e1', 'peek', 'running', '{}', '', 0, 1.0)"
            )
        )
    engine.dispose()

    store = open_store(str(data), database_url)
    with closing(store), store.read() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        row = conn.execute(text("SELECT status, replica_id FROM executions")).one()
        leases = conn.execute(text("SELECT count(*) FROM replicas")).scalar()
    assert version == head_revision()
    assert tuple(row) == ("running", None)
    assert leases == 0


def test_a_driver_error_on_the_hot_statements_is_sqlalchemys_error_and_rolls_back(
    tmp_path: Path, database_url: str | None
) -> None:
    store = open_store(str(tmp_path / "data"), database_url)
    try:
        execution = Execution(skill="s", args={}, requested_by="olga")
        with store.tx() as conn:
            store.executions.insert(conn, execution)
        entries = len(store.audit.entries(limit=1000))
        with pytest.raises(IntegrityError), store.tx() as conn:
            store.audit.append(conn, "olga", "execution.started", execution.id)
            store.executions.insert(conn, execution)  # the same id again
        assert len(store.audit.entries(limit=1000)) == entries  # the entry rolled back with it
        assert store.audit.verify().ok
        with store.tx() as conn:  # the kept writer connection still works
            store.audit.append(conn, "olga", "after")
        assert store.audit.verify().ok
    finally:
        store.close()


def test_the_migrations_form_one_line_ending_at_the_highest_numbered_revision() -> None:
    numbered = sorted(
        p.name[:4] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
    )
    assert migration_heads() == (numbered[-1],)


def test_no_index_of_the_store_is_a_leading_part_of_another_on_its_table(tmp_path: Path) -> None:
    """Every index is written on every insert: one that another index starts with serves no
    query the longer one does not, and costs each call's writes pages for nothing."""
    open_store(str(tmp_path / "data")).close()
    conn = sqlite3.connect(tmp_path / "data" / "ongrid.db")
    try:
        indexes: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for name, table in conn.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'"
        ).fetchall():
            columns = tuple(row[2] for row in conn.execute(f"PRAGMA index_info('{name}')"))
            unique = conn.execute(
                'SELECT "unique" FROM pragma_index_list(?) WHERE name = ?', (table, name)
            ).fetchone()[0]
            if not unique:  # a unique index is a constraint, kept whatever its columns
                indexes.setdefault(table, []).append((name, columns))
        redundant = [
            (name, other)
            for found in indexes.values()
            for name, columns in found
            for other, longer in found
            if other != name and longer[: len(columns)] == columns
        ]
        plan = " ".join(
            str(row)
            for sql in (
                "SELECT id FROM executions WHERE status = 'running'",
                "SELECT id FROM executions WHERE skill = 'x' ORDER BY created_at DESC LIMIT 1",
            )
            for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")
        )
    finally:
        conn.close()

    assert redundant == []
    assert "ix_executions_status_created" in plan
    assert "ix_executions_skill_created" in plan
