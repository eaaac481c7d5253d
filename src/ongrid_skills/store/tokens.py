"""API tokens: only a SHA-256 of each token is stored; the token itself is shown once."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, func, select

from ongrid_skills.errors import Conflict, InvalidRequest
from ongrid_skills.execution.records import iso, new_id
from ongrid_skills.governance.principal import identity_key, token_name
from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import TokenRow
from ongrid_skills.types import Role

_TOKENS = cast(Table, TokenRow.__table__)
TOKEN_PREFIX = "ogs_"  # noqa: S105 - a prefix, not a secret


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: str
    name: str
    role: Role
    created_at: float
    revoked_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role.value,
            "created_at": iso(self.created_at),
            "revoked_at": iso(self.revoked_at),
        }


class TokenRepo:
    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.audit = audit

    def create(self, name: str, role: Role, actor: str = "cli") -> tuple[str, TokenInfo]:
        """A new token under the normalised ``name`` (see governance.principal.token_name),
        unique among active tokens once normalised: one person, one identity. Checked in the
        write transaction that inserts it, so two processes cannot both pass the check."""
        name = token_name(name)
        with self.db.tx() as conn:
            if any(identity_key(active) == name for active in _active_names(conn)):
                raise Conflict(
                    f"an active token is already named {name!r} "
                    "(names are compared after NFKC and case folding)"
                )
            return self._insert(conn, name, role, actor)

    def create_first(self, name: str, role: Role, actor: str) -> tuple[str, TokenInfo] | None:
        """A new token when there is no active token at all, else None. The check and the
        insert are one write transaction, which takes the writers' lock first (PostgreSQL's
        advisory lock, SQLite's BEGIN IMMEDIATE): of processes starting together on an empty
        database, exactly one makes the token, the others see it and make none."""
        name = token_name(name)
        with self.db.tx() as conn:
            if _active_names(conn):
                return None
            return self._insert(conn, name, role, actor)

    def _insert(self, conn: Connection, name: str, role: Role, actor: str) -> tuple[str, TokenInfo]:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        info = TokenInfo(new_id(), name, role, time.time())
        conn.execute(
            _TOKENS.insert().values(
                id=info.id,
                name=name,
                role=role.value,
                token_hash=hash_token(token),
                created_at=info.created_at,
            )
        )
        self.audit.append(conn, actor, "token.created", info.id, {"name": name, "role": role.value})
        return token, info

    def lookup(self, token: str) -> TokenInfo | None:
        with self.db.read() as conn:
            row = (
                conn.execute(
                    select(_TOKENS).where(
                        _TOKENS.c.token_hash == hash_token(token), _TOKENS.c.revoked_at.is_(None)
                    )
                )
                .mappings()
                .first()
            )
        return _info(row) if row else None

    def all(self) -> list[TokenInfo]:
        with self.db.read() as conn:
            rows = conn.execute(select(_TOKENS).order_by(_TOKENS.c.created_at)).mappings().all()
        return [_info(r) for r in rows]

    def named(self, name: str) -> list[TokenInfo]:
        """Every token ever issued under ``name`` (revoked ones too), oldest first."""
        with self.db.read() as conn:
            rows = conn.execute(
                select(_TOKENS).where(_TOKENS.c.name == name).order_by(_TOKENS.c.created_at)
            ).mappings()
            return [_info(r) for r in rows]

    def revoke(self, ident: str, actor: str = "cli") -> bool:
        """Revoke by id or by name (as stored, or as typed before normalisation); True when
        something was revoked."""
        names = {ident}
        with contextlib.suppress(InvalidRequest):
            names.add(token_name(ident))
        with self.db.tx() as conn:
            result = conn.execute(
                _TOKENS.update()
                .where((_TOKENS.c.id == ident) | _TOKENS.c.name.in_(sorted(names)))
                .where(_TOKENS.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
            if result.rowcount:
                self.audit.append(conn, actor, "token.revoked", ident, {})
            return bool(result.rowcount)

    def count_active(self) -> int:
        with self.db.read() as conn:
            value = conn.execute(
                select(func.count()).select_from(_TOKENS).where(_TOKENS.c.revoked_at.is_(None))
            ).scalar()
        return int(value or 0)


def _active_names(conn: Connection) -> list[str]:
    """The names of the active tokens, read on ``conn`` (inside the caller's transaction)."""
    rows = conn.execute(select(_TOKENS.c.name).where(_TOKENS.c.revoked_at.is_(None)))
    return [row[0] for row in rows]


def _info(row: Any) -> TokenInfo:
    return TokenInfo(
        row["id"], row["name"], Role(row["role"]), row["created_at"], row["revoked_at"]
    )
