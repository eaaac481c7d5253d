"""The record of installed packs: a row per installed version, the changes begun, the audit.

:class:`PackRepo` implements :class:`ongrid_skills.packs.records.PackRecords` for one data dir
(``home``: the id kept in that data dir's ``packs/``, so that replicas sharing a database keep
apart the packs each has on its disk). A change is written in two transactions around the
switch of the pack's link (``begin``, then ``commit`` or ``abort``); the audit entry is in the
second, with the state it describes. A version's row says where its active files came from as
of the last install that made them active: the pending change carries that install's source,
signer and trust (migration 0007), and the commit writes them with its actor and time; it
also keeps the capability summary the install computed (migration 0011). This module never
touches a pack's files.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Connection, Table, and_, delete, select, update

from ongrid_skills.execution.records import Status
from ongrid_skills.packs.records import Change, InstalledVersion, Provenance
from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import ExecutionRow, PackChangeRow, PackVersionRow

_VERSIONS = cast(Table, PackVersionRow.__table__)
_CHANGES = cast(Table, PackChangeRow.__table__)
_EXEC = cast(Table, ExecutionRow.__table__)


class PackRepo:
    """The installed packs of the data dir ``home``."""

    def __init__(self, db: Database, audit: AuditLog, home: str) -> None:
        self.db = db
        self.audit = audit
        self.home = home

    def versions(self, pack_id: str | None = None) -> list[InstalledVersion]:
        query = select(_VERSIONS).where(_VERSIONS.c.home == self.home)
        if pack_id is not None:
            query = query.where(_VERSIONS.c.pack_id == pack_id)
        query = query.order_by(_VERSIONS.c.pack_id, _VERSIONS.c.installed_at)
        with self.db.read() as conn:
            rows = conn.execute(query).mappings().all()
        return [_version(row) for row in rows]

    def pending(self) -> list[Change]:
        query = select(_CHANGES).where(_CHANGES.c.home == self.home).order_by(_CHANGES.c.pack_id)
        with self.db.read() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            Change(
                row["action"],
                row["pack_id"],
                row["from_version"],
                row["to_version"],
                row["actor"],
                row["created_at"],
                dict(row["details"] or {}),
                _provenance(row),
            )
            for row in rows
        ]

    def begin(self, change: Change, added: InstalledVersion | None) -> None:
        with self.db.tx() as conn:
            if added is not None:
                conn.execute(delete(_VERSIONS).where(self._one(added.pack_id, added.version)))
                conn.execute(_VERSIONS.insert().values(home=self.home, **_row(added)))
            conn.execute(delete(_CHANGES).where(self._pack(_CHANGES, change.pack_id)))
            conn.execute(
                _CHANGES.insert().values(
                    home=self.home,
                    pack_id=change.pack_id,
                    action=change.action,
                    from_version=change.from_version,
                    to_version=change.to_version,
                    actor=change.actor,
                    created_at=change.at,
                    details=change.details,
                    source=change.installed.source if change.installed else None,
                    signer=change.installed.signer if change.installed else None,
                    trust=change.installed.trust if change.installed else None,
                )
            )

    def commit(self, change: Change, *, keep: tuple[str, ...], recovered: bool = False) -> None:
        with self.db.tx() as conn:
            conn.execute(delete(_CHANGES).where(self._pack(_CHANGES, change.pack_id)))
            if change.to_version is not None:
                activated: dict[str, Any] = {"activated_at": change.at, "withdrawn_at": None}
                if change.installed is not None:  # this install's own source, signer, who, when
                    activated.update(
                        source=change.installed.source,
                        signer=change.installed.signer,
                        trust=change.installed.trust,
                        installed_by=change.actor,
                        installed_at=change.at,
                    )
                conn.execute(
                    update(_VERSIONS)
                    .where(self._one(change.pack_id, change.to_version))
                    .values(**activated)
                )
            conn.execute(
                update(_VERSIONS)
                .where(
                    self._pack(_VERSIONS, change.pack_id),
                    _VERSIONS.c.version.not_in(keep),
                    _VERSIONS.c.withdrawn_at.is_(None),
                )
                .values(withdrawn_at=change.at)
            )
            shown = change.to_version if change.to_version is not None else change.from_version
            row = self._get(conn, change.pack_id, shown) if shown is not None else None
            data = change.audit_data(row)
            if recovered:
                data["recovered"] = True  # committed by the next pack command after a crash
            self.audit.append(conn, change.actor, f"pack.{change.action}", change.pack_id, data)

    def abort(self, change: Change) -> None:
        with self.db.tx() as conn:
            conn.execute(delete(_CHANGES).where(self._pack(_CHANGES, change.pack_id)))
            if change.to_version is not None:
                conn.execute(
                    update(_VERSIONS)
                    .where(
                        self._one(change.pack_id, change.to_version),
                        _VERSIONS.c.activated_at.is_(None),
                        _VERSIONS.c.withdrawn_at.is_(None),
                    )
                    .values(withdrawn_at=change.at, keep_seconds=0)
                )

    def forget(self, pack_id: str, version: str) -> None:
        with self.db.tx() as conn:
            conn.execute(delete(_VERSIONS).where(self._one(pack_id, version)))

    def busy_skills(self) -> set[str]:
        with self.db.read() as conn:
            rows = conn.execute(
                select(_EXEC.c.skill).where(_EXEC.c.status == Status.RUNNING.value).distinct()
            ).all()
        return {row[0] for row in rows}

    def _pack(self, table: Table, pack_id: str) -> Any:
        return and_(table.c.home == self.home, table.c.pack_id == pack_id)

    def _one(self, pack_id: str, version: str) -> Any:
        return and_(self._pack(_VERSIONS, pack_id), _VERSIONS.c.version == version)

    def _get(self, conn: Connection, pack_id: str, version: str) -> InstalledVersion | None:
        row = conn.execute(select(_VERSIONS).where(self._one(pack_id, version))).mappings().first()
        return _version(row) if row is not None else None


def _row(version: InstalledVersion) -> dict[str, Any]:
    return {
        "pack_id": version.pack_id,
        "version": version.version,
        "digest": version.digest,
        "source": version.source,
        "signer": version.signer,
        "trust": version.trust,
        "layout": version.layout,
        "description": version.description,
        "homepage": version.homepage,
        "skills": list(version.skills),
        "personas": list(version.personas),
        "keep_seconds": version.keep_seconds,
        "installed_by": version.installed_by,
        "installed_at": version.installed_at,
        "activated_at": version.activated_at,
        "withdrawn_at": version.withdrawn_at,
        "summary": version.summary,
    }


def _provenance(row: Any) -> Provenance | None:
    if row["source"] is None or row["trust"] is None:
        return None  # a rollback or a removal, or a change begun before migration 0007
    return Provenance(row["source"], row["signer"], row["trust"])


def _version(row: Any) -> InstalledVersion:
    return InstalledVersion(
        pack_id=row["pack_id"],
        version=row["version"],
        digest=row["digest"],
        source=row["source"],
        signer=row["signer"],
        trust=row["trust"],
        layout=row["layout"],
        description=row["description"],
        homepage=row["homepage"],
        skills=tuple(row["skills"] or ()),
        personas=tuple(row["personas"] or ()),
        keep_seconds=int(row["keep_seconds"]),
        installed_by=row["installed_by"],
        installed_at=row["installed_at"],
        activated_at=row["activated_at"],
        withdrawn_at=row["withdrawn_at"],
        summary=row["summary"],
    )
