"""A real SQLite database with one small ``notes`` table, for the store's own machinery
(group commit, checkpoints) without the product's schema."""

from __future__ import annotations

from pathlib import Path

from ongrid_skills.store.connection import Database, open_database


def notes_database(data_dir: Path) -> Database:
    """Open (create) the database in ``data_dir`` with ``notes (n, tx, body)``."""
    database = open_database(str(data_dir))
    with database.tx() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS notes (n INTEGER PRIMARY KEY, tx INTEGER, body TEXT)"
        )
    return database
