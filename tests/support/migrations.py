"""The schema's newest revision, read from the migrations folder the store upgrades with."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory

from ongrid_skills.store.connection import MIGRATIONS


def migration_heads() -> tuple[str, ...]:
    """Every head of the revision graph (one, unless two migrations name the same parent)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return tuple(ScriptDirectory.from_config(config).get_heads())


def head_revision() -> str:
    """The one head every store is upgraded to."""
    heads = migration_heads()
    assert len(heads) == 1, f"the migrations have {len(heads)} heads: {heads}"
    return heads[0]
