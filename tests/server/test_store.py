"""The store: schema from migrations, WAL, persistence across re-opening, hashed API tokens."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from ongrid_skills.errors import Conflict, InvalidRequest
from ongrid_skills.store import open_store
from ongrid_skills.store.models import Base
from ongrid_skills.store.tokens import hash_token
from ongrid_skills.types import Role
from tests.server_support import make_settings, running_app
from tests.support import MakeSkill

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 15.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


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
    assert version == "0003"  # the head: 0003 added the requester's role to approvals


def test_opening_a_migrated_store_again_migrates_nothing_and_keeps_one_version(
    tmp_path: Path,
) -> None:
    for _ in range(2):
        open_store(str(tmp_path / "data")).close()

    conn = sqlite3.connect(tmp_path / "data" / "ongrid.db")
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0003",)]
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


def test_api_tokens_are_stored_only_as_hashes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = open_store(str(data_dir))
    try:
        token, info = store.tokens.create("ci-bot", Role.OPERATOR)
        with store.engine.connect() as conn:
            stored = conn.execute(
                text("SELECT token_hash FROM api_tokens WHERE id = :id"), {"id": info.id}
            ).scalar()
        on_disk = b"".join(p.read_bytes() for p in data_dir.iterdir() if p.is_file())
    finally:
        store.close()

    assert token.startswith("ogs_")
    assert stored == hash_token(token)
    assert token.encode() not in on_disk
    assert token.removeprefix("ogs_").encode() not in on_disk
    assert hash_token(token).encode() in on_disk


def test_token_names_are_unique_among_active_tokens(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        first, _ = store.tokens.create("deploy", Role.OPERATOR)
        with pytest.raises(Conflict):
            store.tokens.create("deploy", Role.ADMIN)
        with pytest.raises(Conflict):
            store.tokens.create("  deploy ", Role.ADMIN)
        assert store.tokens.revoke("deploy")
        assert not store.tokens.revoke("deploy")  # nothing active left under that name
        second, _ = store.tokens.create("deploy", Role.ADMIN)

        assert store.tokens.lookup(first) is None
        again = store.tokens.lookup(second)
        assert again is not None
        assert again.role is Role.ADMIN
        assert [(t.name, t.revoked_at is None) for t in store.tokens.all()] == [
            ("deploy", False),
            ("deploy", True),
        ]
        assert store.tokens.count_active() == 1
    finally:
        store.close()


@pytest.mark.parametrize("name", ["", "   ", "x" * 129, "x" * 65])
def test_a_token_needs_a_name_of_1_to_64_characters(tmp_path: Path, name: str) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        with pytest.raises(InvalidRequest):
            store.tokens.create(name, Role.VIEWER)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("Ada", "ada"),
        ("ＡＤＡ", "ada"),  # fullwidth letters: NFKC
        ("\u212aelvin", "kelvin"),  # KELVIN SIGN: NFKC, then case folding
        ("Straße", "strasse"),  # case folding, not lower()
        ("  ci-bot.eu@ops_1 ", "ci-bot.eu@ops_1"),
        ("x" * 64, "x" * 64),
    ],
)
def test_token_names_are_nfkc_normalised_and_case_folded(
    tmp_path: Path, raw: str, stored: str
) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        token, info = store.tokens.create(raw, Role.VIEWER)
        assert info.name == stored
        found = store.tokens.lookup(token)
        assert found is not None and found.name == stored
        assert [t.name for t in store.tokens.all()] == [stored]
    finally:
        store.close()


@pytest.mark.parametrize(
    "name",
    [
        "ada\u200b",  # zero-width space
        "a\u200dda",  # zero-width joiner
        "ada\u00a0x",  # no-break space inside
        "\u0430da",  # Cyrillic a
        "ad a",
        "ada:admin",
        "-ada",
        ".ada",
        "ada/..",
        "ada\nx",
        "ada\x00",
        "émile",
    ],
)
def test_a_token_name_outside_the_safe_character_set_is_refused(tmp_path: Path, name: str) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        with pytest.raises(InvalidRequest, match="a-z 0-9"):
            store.tokens.create(name, Role.ADMIN)
        assert store.tokens.all() == []
    finally:
        store.close()


@pytest.mark.parametrize(
    "name",
    [
        "manager",
        "Manager",
        "watch",
        "cli",
        "mcp",
        "agent",
        "signal",
        "system",
        "local",
        "anonymous",
        "unknown",
        "root",
    ],
)
def test_names_the_product_writes_into_the_audit_itself_are_reserved(
    tmp_path: Path, name: str
) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        with pytest.raises(InvalidRequest, match="reserved"):
            store.tokens.create(name, Role.ADMIN)
        assert store.tokens.all() == []
    finally:
        store.close()


@pytest.mark.parametrize("second", ["ada", "ADA", "ＡＤＡ", " Ada "])
def test_token_names_are_unique_after_normalisation(tmp_path: Path, second: str) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        store.tokens.create("Ada", Role.ADMIN)
        with pytest.raises(Conflict, match="already named 'ada'"):
            store.tokens.create(second, Role.ADMIN)
        assert [t.name for t in store.tokens.all()] == ["ada"]
    finally:
        store.close()


def test_a_token_is_revoked_by_its_name_as_typed_before_normalisation(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        token, _ = store.tokens.create("Ada", Role.ADMIN)
        assert store.tokens.revoke("ADA")
        assert store.tokens.lookup(token) is None
    finally:
        store.close()


def test_a_token_can_be_revoked_by_id_and_creation_and_revocation_are_audited(
    tmp_path: Path,
) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        token, info = store.tokens.create("temp", Role.VIEWER, actor="cli:ops")
        assert store.tokens.revoke(info.id, actor="cli:ops")
        assert store.tokens.lookup(token) is None
        actions = [(e["action"], e["actor"]) for e in store.audit.entries()]
    finally:
        store.close()
    assert actions == [("token.revoked", "cli:ops"), ("token.created", "cli:ops")]


def test_a_revoked_token_is_refused_by_the_api(tmp_path: Path, skills_root: Path) -> None:
    with running_app(make_settings(tmp_path, skills_root)) as server:
        assert server.call("GET", "/v1/skills", "olga").status_code == 200
        assert server.store.tokens.revoke("olga")
        server.client.app.state.auth.forget()  # type: ignore[attr-defined]  # skip the 2 s cache

        response = server.call("GET", "/v1/skills", "olga")

        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
        assert server.call("GET", "/v1/skills", "oscar").status_code == 200


def test_a_revoked_token_stops_working_within_the_auth_cache_time(
    tmp_path: Path, skills_root: Path
) -> None:
    with running_app(make_settings(tmp_path, skills_root)) as server:
        auth = server.client.app.state.auth  # type: ignore[attr-defined]
        auth.cache_seconds = 0.2
        assert server.call("GET", "/v1/skills", "vera").status_code == 200
        assert server.store.tokens.revoke("vera")

        wait_for(
            lambda: server.call("GET", "/v1/skills", "vera").status_code == 401,
            "the revoked token to be refused",
            timeout=5,
        )


@pytest.mark.parametrize(
    "header",
    [None, "Bearer ", "Bearer ogs_not-a-token", "Basic YWRtaW46YWRtaW4=", "ogs_x"],
    ids=["missing", "empty", "unknown", "basic", "no-scheme"],
)
def test_calls_without_a_valid_token_are_unauthorized(
    tmp_path: Path, skills_root: Path, header: str | None
) -> None:
    headers: dict[str, Any] = {"Authorization": header} if header is not None else {}
    with running_app(make_settings(tmp_path, skills_root)) as server:
        response = server.client.get("/v1/executions", headers=headers)
        assert server.client.get("/v1/health").status_code == 200

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"
