"""Personas stored at run time, on both engines: each change audited with its generation, and
another process on the same database sees them on its next look after the generation's TTL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

from ongrid_skills.errors import Conflict, NotFound
from ongrid_skills.skills.persona_doc import document_digest
from ongrid_skills.skills.registry import Registry
from ongrid_skills.skills.stored_personas import StoredPersonas
from ongrid_skills.store import Store, connection, open_store
from ongrid_skills.store.connection import MIGRATIONS
from ongrid_skills.store.personas import GENERATION_KEY as GEN
from ongrid_skills.types import PermissionMode

NIGHT = {
    "name": "night_watch",
    "description": "Watches the night shift.",
    "when_to_use": "At night.",
    "permission_mode": "mutating-with-confirm",
    "tools": ["probe_*"],
    "prompt": "You watch.\n",
}


@pytest.fixture
def stores(tmp_path: Path, database_url: str | None) -> Iterator[tuple[Store, Store]]:
    """Two stores on one database, as two processes (or replicas) would open it."""
    with (
        closing(open_store(str(tmp_path / "data"), database_url)) as one,
        closing(open_store(str(tmp_path / "data"), database_url)) as two,
    ):
        yield one, two


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def files() -> Registry:
    return Registry({})


def test_each_change_is_audited_with_the_name_and_changes_the_generation(
    stores: tuple[Store, Store],
) -> None:
    store, _ = stores
    repo = store.personas
    assert repo.generation() is None
    repo.create("night_watch", NIGHT, "alice")
    first = repo.generation()
    assert first is not None
    repo.update("night_watch", {**NIGHT, "permission_mode": "read-only"}, "bob")
    second = repo.generation()
    assert second not in (None, first)
    repo.delete("night_watch", "carol")
    assert repo.generation() not in (None, first, second)
    assert repo.all() == []
    entries = [e for e in reversed(store.audit.entries()) if e["action"].startswith("persona.")]
    assert [(e["action"], e["actor"], e["subject"]) for e in entries] == [
        ("persona.created", "alice", "night_watch"),
        ("persona.updated", "bob", "night_watch"),
        ("persona.deleted", "carol", "night_watch"),
    ]
    assert entries[0]["data"]["permission_mode"] == "mutating-with-confirm"
    assert entries[0]["data"]["tools"] == ["probe_*"]
    assert entries[0]["data"]["sha256"] == document_digest(NIGHT)
    assert "prompt" not in entries[0]["data"]
    assert store.audit.verify().ok


def test_a_taken_name_conflicts_and_an_unknown_one_is_not_found(
    stores: tuple[Store, Store],
) -> None:
    repo = stores[0].personas
    repo.create("night_watch", NIGHT, "alice")
    with pytest.raises(Conflict, match="exists"):
        repo.create("night_watch", NIGHT, "bob")
    with pytest.raises(NotFound):
        repo.update("nobody", NIGHT, "bob")
    with pytest.raises(NotFound):
        repo.delete("nobody", "bob")
    (row,) = repo.all()
    assert (row.name, row.document, row.created_by) == ("night_watch", NIGHT, "alice")


def test_another_process_sees_a_change_on_its_first_look_after_the_ttl(
    stores: tuple[Store, Store],
) -> None:
    one, two = stores
    clock = Clock()
    here = StoredPersonas(one.personas, files)
    there = StoredPersonas(two.personas, files, ttl=2.0, clock=clock)
    assert "night_watch" not in there.overlay(files()).personas  # looked once: nothing stored
    here.create(NIGHT, "alice")
    assert "night_watch" in here.overlay(files()).personas  # the writer sees it at once
    clock.now += 1.9
    assert "night_watch" not in there.overlay(files()).personas  # within the TTL: not read
    clock.now += 0.2
    seen = there.overlay(files()).personas["night_watch"]
    assert seen.permission_mode is PermissionMode.MUTATING_WITH_CONFIRM
    assert seen.origin == "stored"
    here.delete("night_watch", "alice")
    clock.now += 2.1
    assert "night_watch" not in there.overlay(files()).personas


def test_migration_0009_goes_down_to_0008_and_up_again_on_both_engines(
    tmp_path: Path, database_url: str | None
) -> None:
    data = tmp_path / "data"
    with closing(open_store(str(data), database_url)) as store:
        store.personas.create("night_watch", NIGHT, "alice")
    engine = create_engine(connection.database_url(str(data), database_url))
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0008")
            assert "personas" not in inspect(conn).get_table_names()
            key = conn.execute(text("SELECT count(*) FROM settings WHERE key = :k"), {"k": GEN})
            assert key.scalar() == 0
    finally:
        engine.dispose()
    with closing(open_store(str(data), database_url)) as store:
        assert (store.personas.all(), store.personas.generation()) == ([], None)
