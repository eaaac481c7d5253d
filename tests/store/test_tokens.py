"""API tokens in the store: kept only as hashes, names unique among active tokens, revocation
audited (on SQLite and PostgreSQL where the engine could matter)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from ongrid_skills.errors import Conflict, InvalidRequest
from ongrid_skills.store import Store, open_store
from ongrid_skills.store.tokens import hash_token
from ongrid_skills.types import Role


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


def test_token_names_are_unique_among_active_tokens(
    tmp_path: Path, database_url: str | None
) -> None:
    store = open_store(str(tmp_path / "data"), database_url)
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
def test_token_names_are_unique_after_normalisation(
    tmp_path: Path, second: str, database_url: str | None
) -> None:
    store = open_store(str(tmp_path / "data"), database_url)
    try:
        store.tokens.create("Ada", Role.ADMIN)
        with pytest.raises(Conflict, match="already named 'ada'"):
            store.tokens.create(second, Role.ADMIN)
        assert [t.name for t in store.tokens.all()] == ["ada"]
    finally:
        store.close()


def test_a_token_is_revoked_by_its_name_as_typed_before_normalisation(
    tmp_path: Path, database_url: str | None
) -> None:
    store = open_store(str(tmp_path / "data"), database_url)
    try:
        token, _ = store.tokens.create("Ada", Role.ADMIN)
        assert store.tokens.revoke("ADA")
        assert store.tokens.lookup(token) is None
    finally:
        store.close()


def test_a_token_can_be_revoked_by_id_and_creation_and_revocation_are_audited(
    tmp_path: Path, database_url: str | None
) -> None:
    store = open_store(str(tmp_path / "data"), database_url)
    try:
        token, info = store.tokens.create("temp", Role.VIEWER, actor="cli:ops")
        assert store.tokens.revoke(info.id, actor="cli:ops")
        assert store.tokens.lookup(token) is None
        actions = [(e["action"], e["actor"]) for e in store.audit.entries()]
    finally:
        store.close()
    assert actions == [("token.revoked", "cli:ops"), ("token.created", "cli:ops")]


def race_round(stores: list[Store], round_: int) -> tuple[list[object], list[object]]:
    """Each store, released together, makes a first token, then a token named deploy<round>:
    what each got (a token, None, or the Conflict)."""
    barrier = threading.Barrier(len(stores))
    firsts: list[object] = []
    named: list[object] = []

    def race(store: Store) -> None:
        barrier.wait()
        firsts.append(store.tokens.create_first(f"admin{round_}", Role.ADMIN, "manager"))
        try:
            named.append(store.tokens.create(f"deploy{round_}", Role.OPERATOR)[1])
        except Conflict as exc:
            named.append(exc)

    threads = [threading.Thread(target=race, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return firsts, named


def test_stores_racing_to_make_a_first_token_or_one_name_make_exactly_one(
    tmp_path: Path, database_url: str | None
) -> None:
    """Four stores on one database (as four processes would be), released together."""
    stores = [open_store(str(tmp_path / "data"), database_url) for _ in range(4)]
    try:
        for round_ in range(5):
            firsts, named = race_round(stores, round_)
            assert len(firsts) == len(named) == len(stores)
            assert sum(first is not None for first in firsts) == 1, firsts
            assert sum(not isinstance(n, Conflict) for n in named) == 1, named
            # The round's tokens go, so the next round starts with no active token again.
            assert stores[0].tokens.revoke(f"admin{round_}")
            assert stores[0].tokens.revoke(f"deploy{round_}")
    finally:
        for store in stores:
            store.close()
