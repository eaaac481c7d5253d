"""Personas written at run time (SPEC §19): the ``personas`` table and its generation record.

Each change is one transaction: the row, its audit entry (``persona.created``,
``persona.updated``, ``persona.deleted``, subject the name, with the mode, the tool lists and
the document's SHA-256; never the prompt itself), and a new random value of the
``personas_generation`` record of ``settings``, which every process compares on its next look
to know whether to read the table again (skills/stored_personas.py). Writers are serialised by
the transaction's write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL: the audit head row).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, cast

from sqlalchemy import Connection, Table, select, text

from ongrid_skills.errors import Conflict, NotFound
from ongrid_skills.skills.persona_doc import StoredPersona, document_digest
from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import PersonaRow, SettingRow

GENERATION_KEY = "personas_generation"
_PERSONAS = cast(Table, PersonaRow.__table__)
_SETTINGS = cast(Table, SettingRow.__table__)
_GENERATION = text("SELECT value FROM settings WHERE key = :key")  # the driver's value as is


class PersonaRepo:
    """The ``personas`` table: the ``PersonaRecords`` of ``skills/persona_doc.py``."""

    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.audit = audit

    def generation(self) -> str | None:
        with self.db.read() as conn:
            row = conn.execute(_GENERATION, {"key": GENERATION_KEY}).first()
        return None if row is None else str(row[0])

    def all(self) -> list[StoredPersona]:
        with self.db.read() as conn:
            rows = conn.execute(select(_PERSONAS).order_by(_PERSONAS.c.name)).mappings().all()
        return [_stored(row) for row in rows]

    def create(self, name: str, document: dict[str, Any], actor: str) -> None:
        with self.db.tx() as conn:
            if self._row(conn, name) is not None:
                raise Conflict(f"a stored persona named {name!r} exists (update it, or delete it)")
            conn.execute(
                _PERSONAS.insert().values(
                    name=name, document=document, created_by=actor, created_at=time.time()
                )
            )
            self._changed(conn, actor, "persona.created", name, document)

    def update(self, name: str, document: dict[str, Any], actor: str) -> None:
        with self.db.tx() as conn:
            if self._row(conn, name) is None:
                raise NotFound(f"no stored persona named {name!r}")
            conn.execute(
                _PERSONAS.update()
                .where(_PERSONAS.c.name == name)
                .values(document=document, updated_by=actor, updated_at=time.time())
            )
            self._changed(conn, actor, "persona.updated", name, document)

    def delete(self, name: str, actor: str) -> None:
        with self.db.tx() as conn:
            row = self._row(conn, name)
            if row is None:
                raise NotFound(f"no stored persona named {name!r}")
            conn.execute(_PERSONAS.delete().where(_PERSONAS.c.name == name))
            self._changed(conn, actor, "persona.deleted", name, dict(row["document"]))

    # ---- rows ----------------------------------------------------------------------------------
    def _row(self, conn: Connection, name: str) -> Any:
        return conn.execute(select(_PERSONAS).where(_PERSONAS.c.name == name)).mappings().first()

    def _changed(
        self, conn: Connection, actor: str, action: str, name: str, document: dict[str, Any]
    ) -> None:
        """The audit entry (first: it takes the write lock on PostgreSQL), then a new generation."""
        self.audit.append(
            conn,
            actor,
            action,
            name,
            {
                "permission_mode": document.get("permission_mode"),
                "tools": document.get("tools") or [],
                "disallowed_tools": document.get("disallowed_tools") or [],
                "sha256": document_digest(document),
            },
        )
        value = uuid.uuid4().hex
        where = _SETTINGS.c.key == GENERATION_KEY
        if conn.execute(_SETTINGS.update().where(where).values(value=value)).rowcount == 0:
            conn.execute(_SETTINGS.insert().values(key=GENERATION_KEY, value=value))


def _stored(row: Any) -> StoredPersona:
    return StoredPersona(
        name=row["name"],
        document=dict(row["document"]),
        created_by=row["created_by"],
        created_at=row["created_at"],
        updated_by=row["updated_by"],
        updated_at=row["updated_at"],
    )


__all__ = ["GENERATION_KEY", "PersonaRepo"]
