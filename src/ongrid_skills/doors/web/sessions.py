"""Who is using the console: the session cookie → the session → the principal.

A route that needs a logged-in user takes the :data:`Session` dependency: it reads the cookie,
finds the session in the store (``store.sessions``: unknown, expired, logged out or with a
revoked token → :class:`LoginRequired`) and gives a :class:`WebSession`, whose ``principal`` is
the one the REST door would see for the same token. What that principal may do is then asked of
the gate, the manager and the approval desk, exactly as REST asks them.

The cookie holds the session id only (``HttpOnly``, so no script reads it; ``SameSite=Strict``;
``Secure`` when the request came over TLS); the API token never leaves the login request.

A session is checked when a request comes. A request that stays open — the live parts' event
streams — is checked again as it goes, by :class:`SessionStreams`: once the session is over
(logged out, expired, its token revoked) the stream gets a last ``error`` event and closes
(:mod:`ongrid_skills.doors.stream_guard`; a :class:`~ongrid_skills.doors.stream_guard.Recheck`
per app asks the store at most once per session every two seconds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from starlette.requests import cookie_parser
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ongrid_skills.doors.stream_guard import Recheck, final_event, guarded, may_stream
from ongrid_skills.doors.web.security import csrf_token
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.settings import Settings
from ongrid_skills.store.sessions import SessionInfo

SESSION_COOKIE = "ongrid_session"
#: What ``secrets.token_urlsafe(32)`` gives; any other cookie value is not looked up at all.
SESSION_ID_RE = re.compile(r"[A-Za-z0-9_-]{43}")
#: What the last event of a stream whose session is over says.
SESSION_ENDED = "the session has ended (logged out, expired, or its token revoked): log in again"


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


def session_checks(app: FastAPI) -> Recheck:
    """Whether a session id still opens a session, asked of the store at most once per id
    every few seconds, and without refreshing it (a stream is no use of the session)."""

    def ask(session_id: str) -> bool:
        manager: Manager = app.state.manager
        idle = app.state.settings.web_session_idle_seconds
        return manager.store.sessions.find(session_id, idle=idle, touch=False) is not None

    return Recheck(ask)


class SessionStreams:
    """ASGI middleware: a request with a session cookie whose answer streams ends with the
    session. The app's ``state.session_checks`` is a :func:`session_checks`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streams = scope["type"] == "http" and may_stream(scope)
        session_id = _session_cookie(scope) if streams else None
        if session_id is None:
            await self.app(scope, receive, send)
            return
        checks: Recheck = scope["app"].state.session_checks
        if _accepts_events(scope) and not checks.ask(session_id):
            # A browser reconnecting a live part after the connection dropped: it is told why
            # the stream is over, as the open stream would have told it, instead of a 401 it
            # could only take for a broken server (EventSource does not show a status).
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream; charset=utf-8"),
                        (b"cache-control", b"no-store"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": final_event(SESSION_ENDED)})
            return
        await guarded(self.app, scope, receive, send, lambda: checks(session_id), SESSION_ENDED)


def _accepts_events(scope: Scope) -> bool:
    return any(
        name == b"accept" and b"text/event-stream" in value for name, value in scope["headers"]
    )


def _session_cookie(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            found = cookie_parser(value.decode("latin-1")).get(SESSION_COOKIE)
            if found is not None and SESSION_ID_RE.fullmatch(found):
                return found
    return None
