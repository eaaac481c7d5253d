"""Who is using the console: the session cookie → the session → the principal.

A route that needs a logged-in user takes the :data:`Session` dependency: it reads the cookie,
finds the session in the store (``store.sessions``: unknown, expired, logged out or with a
revoked token → :class:`LoginRequired`) and gives a :class:`WebSession`, whose ``principal`` is
the one the REST door would see for the same token. What that principal may do is then asked of
the gate, the manager and the approval desk, exactly as REST asks them.

The cookie holds the session id only (``HttpOnly``, so no script reads it; ``SameSite=Strict``;
``Secure`` when the request came over TLS); the API token never leaves the login request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.responses import Response

from ongrid_skills.doors.web.security import csrf_token
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.settings import Settings
from ongrid_skills.store.sessions import SessionInfo

SESSION_COOKIE = "ongrid_session"
#: What ``secrets.token_urlsafe(32)`` gives; any other cookie value is not looked up at all.
SESSION_ID_RE = re.compile(r"[A-Za-z0-9_-]{43}")


class LoginRequired(Exception):
    """No valid session: a page view goes to the login page, anything else gets a 401."""

    def __init__(self, stale_cookie: bool = False) -> None:
        super().__init__("login required")
        self.stale_cookie = stale_cookie


@dataclass(frozen=True, slots=True)
class WebSession:
    """A logged-in user: the stored session, the principal it acts as, its CSRF token."""

    info: SessionInfo
    principal: Principal
    csrf: str


def manager_of(request: Request) -> Manager:
    manager: Manager = request.app.state.manager
    return manager


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def optional_session(request: Request) -> WebSession | None:
    """The request's session, or None (no cookie, or one that no longer opens a session)."""
    raw = request.cookies.get(SESSION_COOKIE)
    if raw is None or not SESSION_ID_RE.fullmatch(raw):
        return None
    idle = settings_of(request).web_session_idle_seconds
    info = manager_of(request).store.sessions.find(raw, idle=idle)
    if info is None:
        return None
    session = WebSession(info, Principal(info.name, info.role), csrf_token(raw))
    request.state.session = session  # for render(): the page shows who is logged in
    return session


async def current_session(request: Request) -> WebSession:
    """The request's session; :class:`LoginRequired` without one. Async on purpose: FastAPI
    runs sync dependencies in a worker thread."""
    session = await optional_session(request)
    if session is None:
        raise LoginRequired(stale_cookie=SESSION_COOKIE in request.cookies)
    return session


#: The dependency of every route that needs a logged-in user.
Session = Annotated[WebSession, Depends(current_session)]


def set_session_cookie(response: Response, request: Request, session_id: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=settings_of(request).web_session_max_seconds,
        path="/",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        SESSION_COOKIE,
        path="/",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
