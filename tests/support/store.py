"""The store as tests start it.

- :func:`migrated_data_dir`: a new data dir whose SQLite store already has the product's
  schema, copied from one migrated for real once per test process. Creating the schema of an
  empty database runs every Alembic revision (0.1 s at best, 0.3 s on a loaded machine), and
  the `server` fixture alone opens a few hundred stores; a test about what a store holds, not
  about its creation, starts from the copy. Migrating an empty database stays the job of
  tests/store and of every `serve` and CLI process started on a fresh data dir.
- :func:`notes_database`: a real SQLite database with one small ``notes`` table, for the
  store's own machinery (group commit, checkpoints) without the product's schema.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from ongrid_skills.store import open_store
from ongrid_skills.store.connection import Database, database_url, open_database

#: The SQLite file of a data dir (what :func:`database_url` names).
STORE_FILE = "ongrid.db"

_template: Path | None = None


def _migrated() -> Path:
    """A store file migrated to the newest revision by the product itself (once a process)."""
    global _template  # noqa: PLW0603 - one per process, made on first use
    if _template is None:
        root = Path(tempfile.mkdtemp(prefix="ongrid-schema-"))
        atexit.register(shutil.rmtree, root, True)
        open_store(str(root / "data")).close()  # closed: the WAL is checkpointed into the file
        _template = root / "data" / STORE_FILE
    return _template


def migrated_data_dir(data_dir: str, url: str | None = None) -> None:
    """Give ``data_dir`` a migrated, empty SQLite store when it has none yet (nothing for a
    ``url``: another database; nor for a data dir that holds a store already). Its audit key
    is made when the store is opened, as for any new data dir."""
    if url:
        return
    path = Path(database_url(data_dir, None).removeprefix("sqlite:///"))  # makes the dir, 0700
    if not path.exists():
        shutil.copyfile(_migrated(), path)
        os.chmod(path, _migrated().stat().st_mode & 0o777)


def notes_database(data_dir: Path) -> Database:
    """Open (create) the database in ``data_dir`` with ``notes (n, tx, body)``."""
    database = open_database(str(data_dir))
    with database.tx() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS notes (n INTEGER PRIMARY KEY, tx INTEGER, body TEXT)"
        )
    return database
