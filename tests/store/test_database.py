"""The database: schema from migrations, SQLite in WAL mode, persistence across re-opening."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from ongrid_skills.store import open_store
from ongrid_skills.store.models import Base
from ongrid_skills.types import Role
from tests.support.server import make_settings, running_app
from tests.support.skills import MakeSkill


def test_migrations_create_exactly_the_schema_of_the_models(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        with store.engine.connect() as conn:
            context = MigrationContext.configure(conn)
            differences = compare_metadata(context, Base.metadata)
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        store.close()

    assert differences == []
    assert version == "0004"  # the head: 0004 added the web console's sessions


def test_opening_a_migrated_store_again_migrates_nothing_and_keeps_one_version(
    tmp_path: Path,
) -> None:
    for _ in range(2):
        open_store(str(tmp_path / "data")).close()

    conn = sqlite3.connect(tmp_path / "data" / "ongrid.db")
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0004",)]
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
