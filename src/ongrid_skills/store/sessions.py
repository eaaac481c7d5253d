"""Web console sessions: a random id lives in the browser's cookie, only its SHA-256 lives here.

A session acts as the API token it was opened with: reading one joins that token's row, so
revoking the token ends its sessions at once, and the role is always the token's current one.
Expiry is twofold: ``expires_at`` is absolute (set when the session opens), and the idle limit
counts from ``seen_at``. Readers refresh ``seen_at`` at most once per :data:`SEEN_GRANULARITY`
seconds, because a write per page view would queue every request behind the store's one writer.

Opening, closing and refused logins are audited. This module decides nothing about cookies,
CSRF or lifetimes (the web door does, from the settings); it must never import a door.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, delete, func, select, update

from ongrid_skills.store.audit import AuditLog
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import TokenRow, WebSessionRow
from ongrid_skills.store.tokens import TokenInfo
from ongrid_skills.types import Role

_SESSIONS = cast(Table, WebSessionRow.__table__)
_TOKENS = cast(Table, TokenRow.__table__)
#: ``seen_at`` is rewritten only when it is older than this: the idle expiry is that coarse.
SEEN_GRANULARITY = 60.0


def hash_session_id(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One open session and who it acts as (the name and role of its token, read now)."""

    id_hash: str
    token_id: str
    name: str
    role: Role
    created_at: float
    seen_at: float
    expires_at: float

    @property
    def short(self) -> str:
        """What the audit log names a session by: a prefix of its hash, never its id."""
        return self.id_hash[:16]


class SessionRepo:
    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.audit = audit

    def open(
        self, token: TokenInfo, lifetime: float, client: str | None = None
    ) -> tuple[str, SessionInfo]:
        """A new session for ``token``, valid ``lifetime`` seconds at most; returns its id (shown
        once, to go into the cookie) and its record."""
        session_id = secrets.token_urlsafe(32)
        now = time.time()
        info = SessionInfo(
            hash_session_id(session_id), token.id, token.name, token.role, now, now, now + lifetime
        )
        with self.db.tx() as conn:
            conn.execute(
                _SESSIONS.insert().values(
                    id_hash=info.id_hash,
                    token_id=token.id,
                    created_at=now,
                    seen_at=now,
                    expires_at=info.expires_at,
                )
            )
            self.audit.append(
                conn,
                token.name,
                "session.opened",
                info.short,
                {"token_id": token.id, "role": token.role.value, "client": client},
            )
        return session_id, info

    def find(
        self, session_id: str, idle: float, now: float | None = None, *, touch: bool = True
    ) -> SessionInfo | None:
        """The session with this id, or None: unknown, closed, past its absolute or idle expiry,
        or its token revoked. Refreshes ``seen_at`` when it is older than SEEN_GRANULARITY,
        unless ``touch`` is False (a check that is no use of the session: a long-lived stream
        asking whether it may go on must not keep an idle session alive)."""
        now = time.time() if now is None else now
        id_hash = hash_session_id(session_id)
        query = (
            select(_SESSIONS, _TOKENS.c.name, _TOKENS.c.role)
            .join(_TOKENS, _TOKENS.c.id == _SESSIONS.c.token_id)
            .where(_SESSIONS.c.id_hash == id_hash, _TOKENS.c.revoked_at.is_(None))
        )
        with self.db.read() as conn:
            row = conn.execute(query).mappings().first()
        if row is None or now >= row["expires_at"] or now - row["seen_at"] >= idle:
            return None
        info = _info(row)
        if touch and now - info.seen_at >= SEEN_GRANULARITY:
            with self.db.tx() as conn:
                conn.execute(
                    update(_SESSIONS).where(_SESSIONS.c.id_hash == id_hash).values(seen_at=now)
                )
        return info

    def close(self, info: SessionInfo, reason: str = "logout") -> bool:
        """End a session (its row goes); True when it was still there."""
        with self.db.tx() as conn:
            result = conn.execute(delete(_SESSIONS).where(_SESSIONS.c.id_hash == info.id_hash))
            if result.rowcount:
                self.audit.append(conn, info.name, "session.closed", info.short, {"reason": reason})
            return bool(result.rowcount)

    def purge(self, idle: float, now: float | None = None) -> int:
        """Delete the rows of expired sessions (they are refused anyway); how many went."""
        now = time.time() if now is None else now
        with self.db.tx() as conn:
            result = conn.execute(
                delete(_SESSIONS).where(
                    (_SESSIONS.c.expires_at <= now) | (_SESSIONS.c.seen_at <= now - idle)
                )
            )
            return int(result.rowcount or 0)

    def refused(self, client: str | None, reason: str) -> None:
        """Audit a refused login (the token that was tried is never written anywhere)."""
        with self.db.tx() as conn:
            self.audit.append(
                conn, "anonymous", "session.refused", None, {"client": client, "reason": reason}
            )

    def count(self) -> int:
        """How many session rows there are (expired ones not purged yet included)."""
        with self.db.read() as conn:
            return int(conn.execute(select(func.count()).select_from(_SESSIONS)).scalar() or 0)


def _info(row: Any) -> SessionInfo:
    return SessionInfo(
        row["id_hash"],
        row["token_id"],
        row["name"],
        Role(row["role"]),
        row["created_at"],
        row["seen_at"],
        row["expires_at"],
    )
