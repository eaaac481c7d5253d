"""The Store: the database and its repositories, composed once per process.

Everything above the store (manager, approval desk, doors) talks to this object; the repositories
below it only see the :class:`~ongrid_skills.store.connection.Database`, so no repository ever
imports the Store (this was an import circle).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from ongrid_skills.store.approvals import ApprovalRepo
from ongrid_skills.store.audit import AuditLog, open_audit
from ongrid_skills.store.connection import Database, open_database
from ongrid_skills.store.credentials import CredentialRepo
from ongrid_skills.store.executions import ExecutionRepo
from ongrid_skills.store.leases import LeaseRepo
from ongrid_skills.store.personas import PersonaRepo
from ongrid_skills.store.preferences import PreferenceRepo
from ongrid_skills.store.schedules import ScheduleRepo
from ongrid_skills.store.sessions import SessionRepo
from ongrid_skills.store.tokens import TokenRepo
from ongrid_skills.store.triggers import TriggerRepo

if TYPE_CHECKING:
    from ongrid_skills.store.packs import PackRepo


class Store:
    """The repositories over one :class:`Database`: ``executions``, ``approvals``, ``audit``,
    ``tokens``, ``sessions``, ``leases``, ``credentials``, ``personas``, ``preferences``,
    ``triggers``, ``schedules``; ``tx()`` and ``read()`` are the database's."""

    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.engine = db.engine
        self.dialect = db.dialect
        self.audit = audit
        self.executions = ExecutionRepo(db)
        self.approvals = ApprovalRepo(db)
        self.tokens = TokenRepo(db, self.audit)
        self.sessions = SessionRepo(db, self.audit)
        self.leases = LeaseRepo(db)
        self.credentials = CredentialRepo(db, self.audit)
        self.personas = PersonaRepo(db, self.audit)
        self.preferences = PreferenceRepo(db)
        self.triggers = TriggerRepo(db, self.audit)
        self.schedules = ScheduleRepo(db, self.audit)

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        """One write transaction (see :meth:`Database.tx`)."""
        with self.db.tx() as conn:
            yield conn

    def defer(self, write: Callable[[Connection], None]) -> Future[None]:
        """A write committed soon with others (see :meth:`Database.defer`)."""
        return self.db.defer(write)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read connection (see :meth:`Database.read`)."""
        with self.db.read() as conn:
            yield conn

    def packs(self, home: str) -> PackRepo:
        """The installed packs of the data dir ``home`` (see ongrid_skills.packs.home)."""
        # Imported here: the packs library (cryptography) is for the commands that use packs.
        from ongrid_skills.store.packs import PackRepo  # noqa: PLC0415

        return PackRepo(self.db, self.audit, home)

    def close(self) -> None:
        self.audit.close()  # the last anchor is written before the database goes
        self.db.close()


def open_store(
    data_dir: str = ".ongrid",
    url: str | None = None,
    *,
    audit_key_file: str | None = None,
    audit_sink: str | None = None,
) -> Store:
    """Open (and create or migrate) the store, with its audit key, head anchor and sink."""
    db = open_database(data_dir, url)
    try:
        return Store(db, open_audit(db, data_dir, audit_key_file, audit_sink))
    except BaseException:
        db.close()
        raise
