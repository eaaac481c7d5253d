"""Stored credentials and their bindings to slots (SPEC §18), with an audit entry per change.

A credential's fields are kept as their *sources*: ``{"sealed": "…"}`` (a value encrypted by
``ongrid_skills.credentials.cipher`` before it reaches this module) or a reference read at call
time (``{"file": …}``, ``{"env": …}``, ``{"command": …}``). This module never sees a value in
clear and never returns a sealed one to a caller that shows things: :meth:`CredentialInfo.to_dict`
has names, field names, kinds, who and when. Audit entries hold names only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Connection, Table, select

from ongrid_skills.errors import Conflict, NotFound
from ongrid_skills.execution.records import iso
from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import CredentialBindingRow, CredentialRow

_CREDENTIALS = cast(Table, CredentialRow.__table__)
_BINDINGS = cast(Table, CredentialBindingRow.__table__)


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    """One credential as stored: ``sources`` maps each field to its (sealed or referenced)
    source; only :meth:`to_dict` is for showing, and it holds no source."""

    name: str
    sources: dict[str, dict[str, Any]]
    created_by: str
    created_at: float
    rotated_by: str | None = None
    rotated_at: float | None = None
    last_used_at: float | None = None
    bound_to: tuple[Binding, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fields": {
                name: ("stored" if "sealed" in source else next(iter(source)))
                for name, source in sorted(self.sources.items())
            },
            "created_by": self.created_by,
            "created_at": iso(self.created_at),
            "rotated_by": self.rotated_by,
            "rotated_at": iso(self.rotated_at),
            "last_used_at": iso(self.last_used_at),
            "bindings": [b.to_dict() for b in self.bound_to],
        }


@dataclass(frozen=True, slots=True)
class Binding:
    """A credential bound to ``slot`` of ``target``: ``skill:<name>`` or ``pack:<id>``."""

    target: str
    slot: str
    credential: str
    bound_by: str
    bound_at: float

    def to_dict(self) -> dict[str, Any]:
        kind, _, name = self.target.partition(":")
        return {
            kind: name,
            "slot": self.slot,
            "credential": self.credential,
            "bound_by": self.bound_by,
            "bound_at": iso(self.bound_at),
        }


class CredentialRepo:
    """The ``credentials`` and ``credential_bindings`` tables."""

    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.audit = audit

    def create(self, name: str, sources: dict[str, dict[str, Any]], actor: str) -> None:
        with self.db.tx() as conn:
            if self._row(conn, name) is not None:
                raise Conflict(f"a credential named {name!r} exists (rotate it, or delete it)")
            conn.execute(
                _CREDENTIALS.insert().values(
                    name=name, fields=sources, created_by=actor, created_at=time.time()
                )
            )
            self.audit.append(conn, actor, "credential.created", name, {"fields": sorted(sources)})

    def rotate(self, name: str, sources: dict[str, dict[str, Any]], actor: str) -> None:
        """Replace the given fields' sources (the others are kept); the next call uses them."""
        with self.db.tx() as conn:
            row = self._row(conn, name)
            if row is None:
                raise NotFound(f"no credential named {name!r}")
            merged = {**row["fields"], **sources}
            conn.execute(
                _CREDENTIALS.update()
                .where(_CREDENTIALS.c.name == name)
                .values(fields=merged, rotated_by=actor, rotated_at=time.time())
            )
            self.audit.append(conn, actor, "credential.rotated", name, {"fields": sorted(sources)})

    def delete(self, name: str, actor: str) -> None:
        """Delete a credential that nothing is bound to (unbind first: a skill must not lose
        its credential without someone saying which)."""
        with self.db.tx() as conn:
            if self._row(conn, name) is None:
                raise NotFound(f"no credential named {name!r}")
            bound = self._bindings(conn, credential=name)
            if bound:
                where = ", ".join(f"{b.target} slot {b.slot}" for b in bound)
                raise Conflict(f"credential {name!r} is bound ({where}): unbind it first")
            conn.execute(_CREDENTIALS.delete().where(_CREDENTIALS.c.name == name))
            self.audit.append(conn, actor, "credential.deleted", name, {})

    def get(self, name: str) -> CredentialInfo:
        with self.db.read() as conn:
            row = self._row(conn, name)
            if row is None:
                raise NotFound(f"no credential named {name!r}")
            return _info(row, self._bindings(conn, credential=name))

    def all(self) -> list[CredentialInfo]:
        with self.db.read() as conn:
            rows = conn.execute(select(_CREDENTIALS).order_by(_CREDENTIALS.c.name)).mappings()
            bindings = self._bindings(conn)
            return [_info(r, tuple(b for b in bindings if b.credential == r["name"])) for r in rows]

    def used(self, names: list[str]) -> None:
        """Note that a call was given these credentials (a deferred write: off the call path)."""
        if not names:
            return
        now = time.time()

        def write(conn: Connection) -> None:
            conn.execute(
                _CREDENTIALS.update().where(_CREDENTIALS.c.name.in_(names)).values(last_used_at=now)
            )

        self.db.defer(write)

    def bind(self, credential: str, target: str, slot: str, actor: str) -> Binding | None:
        """Bind ``credential`` to ``slot`` of ``target``; return the binding it replaced."""
        with self.db.tx() as conn:
            if self._row(conn, credential) is None:
                raise NotFound(f"no credential named {credential!r}")
            previous = self._binding(conn, target, slot)
            if previous is not None:
                conn.execute(
                    _BINDINGS.delete().where(
                        (_BINDINGS.c.target == target) & (_BINDINGS.c.slot == slot)
                    )
                )
            conn.execute(
                _BINDINGS.insert().values(
                    target=target,
                    slot=slot,
                    credential=credential,
                    bound_by=actor,
                    bound_at=time.time(),
                )
            )
            data: dict[str, Any] = {"target": target, "slot": slot}
            if previous is not None:
                data["replaced"] = previous.credential
            self.audit.append(conn, actor, "credential.bound", credential, data)
            return previous

    def unbind(self, target: str, slot: str, actor: str) -> Binding:
        with self.db.tx() as conn:
            previous = self._binding(conn, target, slot)
            if previous is None:
                raise NotFound(f"nothing is bound to slot {slot!r} of {target}")
            conn.execute(
                _BINDINGS.delete().where(
                    (_BINDINGS.c.target == target) & (_BINDINGS.c.slot == slot)
                )
            )
            self.audit.append(
                conn,
                actor,
                "credential.unbound",
                previous.credential,
                {"target": target, "slot": slot},
            )
            return previous

    def bindings(self) -> list[Binding]:
        with self.db.read() as conn:
            return list(self._bindings(conn))

    # ---- rows ----------------------------------------------------------------------------------
    def _row(self, conn: Connection, name: str) -> Any:
        return (
            conn.execute(select(_CREDENTIALS).where(_CREDENTIALS.c.name == name)).mappings().first()
        )

    def _binding(self, conn: Connection, target: str, slot: str) -> Binding | None:
        row = (
            conn.execute(
                select(_BINDINGS).where((_BINDINGS.c.target == target) & (_BINDINGS.c.slot == slot))
            )
            .mappings()
            .first()
        )
        return _binding(row) if row is not None else None

    def _bindings(self, conn: Connection, *, credential: str | None = None) -> tuple[Binding, ...]:
        query = select(_BINDINGS).order_by(_BINDINGS.c.target, _BINDINGS.c.slot)
        if credential is not None:
            query = query.where(_BINDINGS.c.credential == credential)
        return tuple(_binding(r) for r in conn.execute(query).mappings())


def _binding(row: Any) -> Binding:
    return Binding(row["target"], row["slot"], row["credential"], row["bound_by"], row["bound_at"])


def _info(row: Any, bindings: tuple[Binding, ...]) -> CredentialInfo:
    return CredentialInfo(
        name=row["name"],
        sources=dict(row["fields"]),
        created_by=row["created_by"],
        created_at=row["created_at"],
        rotated_by=row["rotated_by"],
        rotated_at=row["rotated_at"],
        last_used_at=row["last_used_at"],
        bound_to=bindings,
    )


__all__ = ["Binding", "CredentialInfo", "CredentialRepo"]
