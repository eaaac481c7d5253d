"""API tokens in the store: kept only as hashes, names unique among active tokens, revocation
audited."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from ongrid_skills.errors import Conflict, InvalidRequest
from ongrid_skills.store import open_store
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


@pytest.mark.parametrize("name", ["", "   ", "x" * 129])
def test_a_token_needs_a_name_of_1_to_128_characters(tmp_path: Path, name: str) -> None:
    store = open_store(str(tmp_path / "data"))
    try:
        with pytest.raises(InvalidRequest):
            store.tokens.create(name, Role.VIEWER)
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
