"""The Store: one engine, migrations on open, and write transactions that keep the audit chain.

Embedded default: SQLite in WAL mode at ``$ONGRID_DATA_DIR/ongrid.db``; ``ONGRID_DATABASE_URL``
selects another engine (PostgreSQL for replicas sharing state).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event

from ongrid_skills.paths import register_store_file
from ongrid_skills.store.approvals import ApprovalRepo
from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.executions import ExecutionRepo
from ongrid_skills.store.rawsql import RawSQL
from ongrid_skills.store.tokens import TokenRepo

MIGRATIONS = Path(__file__).with_name("migrations")


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self._write_lock = threading.RLock()
        self.raw = RawSQL(engine)
        self._writer: Connection | None = None
        self.audit = AuditLog(self)
        self.executions = ExecutionRepo(self)
        self.approvals = ApprovalRepo(self)
        self.tokens = TokenRepo(self)

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        """One write transaction. Writers are serialised (one kept connection, one lock) so the
        audit chain stays linear; SQLite takes its write lock up front (BEGIN IMMEDIATE)."""
        with self._write_lock:
            if self._writer is None or self._writer.closed:
                self._writer = self.engine.connect()
                self._writer.info["immediate"] = True
            try:
                with self._writer.begin():
                    yield self._writer
            except BaseException:
                if self._writer.invalidated:
                    self._writer.close()
                    self._writer = None
                raise

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    def migrate(self) -> None:
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    def close(self) -> None:
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        self.engine.dispose()


def database_url(data_dir: str, url: str | None) -> str:
    if url:
        return url
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    return f"sqlite:///{os.path.abspath(os.path.join(data_dir, 'ongrid.db'))}"


def open_store(data_dir: str = ".ongrid", url: str | None = None) -> Store:
    """Open (and create or migrate) the store."""
    resolved = database_url(data_dir, url)
    kwargs: dict[str, Any] = {}
    if resolved.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    engine = create_engine(resolved, **kwargs)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _begin)
        if engine.url.database and engine.url.database != ":memory:":
            # Before the first connection: from now on no other code in this process may open
            # this file (see paths.register_store_file for why).
            register_store_file(engine.url.database)
    store = Store(engine)
    store.migrate()
    return store


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" event issues BEGIN itself
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _begin(conn: Connection) -> None:
    """Writers start with BEGIN IMMEDIATE: two processes never both read the same audit head."""
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("immediate") else "BEGIN")
