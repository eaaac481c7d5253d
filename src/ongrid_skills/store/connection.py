"""The Database: one engine, migrations on open, and the serialised write transaction.

Embedded default: SQLite in WAL mode at ``$ONGRID_DATA_DIR/ongrid.db``; ``ONGRID_DATABASE_URL``
selects another engine (PostgreSQL for replicas sharing state). Repositories receive this object,
never the :class:`~ongrid_skills.store.facade.Store` that composes them. Writes that may wait
(a call's outcome) are deferred and committed in groups (:mod:`ongrid_skills.store.groupcommit`);
every read commits them first. This module must never import a repository.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError

from ongrid_skills.errors import StorageFull
from ongrid_skills.paths import register_store_file
from ongrid_skills.store.checkpoint import BACKSTOP_PAGES, Checkpointer
from ongrid_skills.store.groupcommit import GroupCommit, Write
from ongrid_skills.store.rawsql import RawSQL

MIGRATIONS = Path(__file__).with_name("migrations")
LOG = logging.getLogger("ongrid_skills.store")
#: The PostgreSQL advisory lock every write transaction and every migration takes ("ongrid").
WRITER_LOCK = 0x6F6E67726964
#: Receives, once a transaction has committed, every item collected for it (see after_commit).
CommitHook = Callable[[list[Any]], None]


class Database:
    """One engine and one kept writer connection; ``tx()`` for writes, ``read()`` for reads."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        path = engine.url.database if self.dialect == "sqlite" else None
        self.checkpointer = Checkpointer(path) if path and path != ":memory:" else None
        self._write_lock = threading.RLock()
        self.raw = RawSQL(engine)
        self._writer: Connection | None = None
        # Why one lock for every writer of a shared PostgreSQL database: SQLite's BEGIN IMMEDIATE
        # makes each write transaction the only one, and the store is built on that — the audit
        # chain reads its head and appends after it, a claim is decided on the newest committed
        # row. Several replicas writing at once under READ COMMITTED would otherwise interleave
        # (two entries with one seq, the first entry of an empty chain written twice) or
        # deadlock (two transactions locking the same rows in another order). A transaction-level
        # advisory lock taken first gives them the same one-writer-at-a-time order; it is
        # released by the commit or the rollback, and by the server if the replica dies.
        self.exclusive = (
            f"SELECT pg_advisory_xact_lock({WRITER_LOCK})" if self.dialect == "postgresql" else None
        )
        self._collected: dict[CommitHook, list[Any]] | None = None  # the open transaction's
        self.group = GroupCommit(
            self.tx,
            self._write_lock,
            inline=self.dialect == "sqlite",
            tx_open=lambda: self._collected is not None,
        )

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        """One write transaction. Writers are serialised (one kept connection, one lock) so the
        audit chain stays linear; SQLite takes its write lock up front (BEGIN IMMEDIATE), and
        PostgreSQL the advisory lock of every writer of the database (see ``exclusive``)."""
        with self._write_lock:
            if self._writer is None or self._writer.closed:
                self._writer = self.engine.connect()
                self._writer.info["immediate"] = True
            collected: dict[CommitHook, list[Any]] = {}
            self._collected = collected
            try:
                with self._writer.begin():
                    if self.exclusive is not None:
                        self._writer.exec_driver_sql(self.exclusive)
                    yield self._writer
            except OperationalError as exc:
                self._drop_invalidated()
                if storage_full(exc):
                    raise StorageFull(
                        "the data store's filesystem is full: nothing was written"
                    ) from exc
                raise
            except BaseException:
                self._drop_invalidated()
                raise
            finally:
                self._collected = None
            if self.checkpointer is not None:
                self.checkpointer.committed()
            # Committed. Still under the lock, so hooks see commits in commit order; a hook
            # must be cheap (the audit anchor only queues) and its failure cannot undo the commit.
            for hook, items in collected.items():
                try:
                    hook(items)
                except Exception:
                    LOG.exception("after-commit hook %r failed", hook)

    def _drop_invalidated(self) -> None:
        if self._writer is not None and self._writer.invalidated:
            self._writer.close()
            self._writer = None

    def after_commit(self, hook: CommitHook, item: Any) -> None:
        """Collect ``item`` for ``hook``: once the open transaction commits, ``hook`` receives
        the items collected for it, in order; on rollback, nothing. Only inside :meth:`tx`."""
        if self._collected is None:
            raise RuntimeError("after_commit outside a write transaction (Database.tx)")
        self._collected.setdefault(hook, []).append(item)

    def defer(self, write: Write) -> Future[None]:
        """Run ``write`` in a write transaction soon, with others (group commit); every read
        of this process commits it first. The future settles when it is committed (see
        :mod:`ongrid_skills.store.groupcommit`)."""
        return self.group.defer(write)

    def flush(self) -> None:
        """Commit the deferred writes now."""
        self.group.flush()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection of its own for reads, which never wait for the writer (WAL, MVCC), once
        the deferred writes are committed (read-your-writes)."""
        self.group.flush()
        with self.engine.connect() as conn:
            yield conn

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (done on every open)."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        # Processes starting together on a new database migrate one after the other: SQLite
        # takes its write lock up front (a deferred BEGIN would fail with "database is locked"
        # when upgrading its read lock), PostgreSQL the writers' advisory lock.
        with self.engine.connect() as conn:
            conn.info["immediate"] = True
            with conn.begin():
                if self.exclusive is not None:
                    conn.exec_driver_sql(self.exclusive)
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")

    def close(self) -> None:
        self.group.close()
        if self.checkpointer is not None:
            self.checkpointer.close()
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        self.engine.dispose()


def storage_full(exc: BaseException) -> bool:
    """Whether a database error means "no space left": SQLite's SQLITE_FULL ("database or disk
    is full"), an OS-level ENOSPC/EDQUOT, or PostgreSQL's disk_full (SQLSTATE 53100)."""
    original = getattr(exc, "orig", None) or exc
    if isinstance(original, OSError) and original.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if (
        getattr(original, "sqlstate", None) == "53100"
        or getattr(original, "pgcode", None) == "53100"
    ):
        return True
    text = str(original).lower()
    return "disk is full" in text or "no space left" in text


def database_url(data_dir: str, url: str | None) -> str:
    """``url`` when given, else the embedded SQLite file in ``data_dir`` (created mode 0700)."""
    if url:
        return url
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    return f"sqlite:///{os.path.abspath(os.path.join(data_dir, 'ongrid.db'))}"


def open_database(data_dir: str = ".ongrid", url: str | None = None) -> Database:
    """Open (and create or migrate) the database."""
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
    db = Database(engine)
    db.migrate()
    return db


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" event issues BEGIN itself
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")  # see store.checkpoint
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _begin(conn: Connection) -> None:
    """Writers start with BEGIN IMMEDIATE: two processes never both read the same audit head.
    Sent on the driver's connection, as the hot statements are (see rawsql)."""
    sql = "BEGIN IMMEDIATE" if conn.info.get("immediate") else "BEGIN"
    try:
        conn.connection.dbapi_connection.execute(sql)  # type: ignore[union-attr]
    except conn.dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(
            sql, (), exc, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
        ) from exc
