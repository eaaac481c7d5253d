"""Logging in and out: an API token is exchanged for a session once, at ``POST /login``.

The token is posted in the login form (never in a URL), looked up by its hash like every REST
call's (``store.tokens``), and forgotten: the page and its scripts never see it again, only the
``HttpOnly`` session cookie. The login form has no session yet, so its CSRF check is a
double-submit nonce: a random value in a short-lived ``HttpOnly`` cookie of its own, which the
form must echo. Failed logins are audited and throttled per client address (``throttle``).
Logout deletes the session row: the old cookie opens nothing afterwards.
"""

from __future__ import annotations

import math
import re
import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import RedirectResponse, Response

from ongrid_skills.doors.web.forms import CheckedForm, read_form
from ongrid_skills.doors.web.security import same_token
from ongrid_skills.doors.web.sessions import (
    Session,
    WebSession,
    clear_session_cookie,
    manager_of,
    optional_session,
    set_session_cookie,
    settings_of,
)
from ongrid_skills.doors.web.templates import render
from ongrid_skills.doors.web.throttle import LoginThrottle

router = APIRouter()
LOGIN_COOKIE = "ongrid_login"
LOGIN_COOKIE_SECONDS = 900
MAX_TOKEN_CHARS = 512
#: A local path to go back to after login: one leading slash (``//host`` is another site), no
#: backslash or control character (browsers read ``/\\host`` as ``//host``).
SAFE_NEXT_RE = re.compile(r"/(?![/\\])[^\\\x00-\x1f\x7f]{0,2000}")


def safe_next(value: str | None) -> str:
    """Where to go after login: ``value`` when it is a local path (not the login page), else
    ``/``."""
    if value and SAFE_NEXT_RE.fullmatch(value) and not value.startswith("/login"):
        return value
    return "/"


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.get("/login")
async def login_page(
    request: Request,
    session: Annotated[WebSession | None, Depends(optional_session)],
    next_path: Annotated[str | None, Query(alias="next")] = None,
    ended: bool = False,
) -> Response:
    if session is not None:
        return RedirectResponse(safe_next(next_path), status_code=303)
    notice = "You are logged out." if ended else None
    return login_form(request, next_path, notice=notice)


def login_form(
    request: Request,
    next_path: str | None,
    *,
    status: int = 200,
    error: str | None = None,
    notice: str | None = None,
) -> Response:
    """The login page with a fresh nonce (in its cookie and in the form)."""
    nonce = secrets.token_urlsafe(24)
    response = render(
        request,
        "login.html",
        status=status,
        title="Log in",
        nonce=nonce,
        next=safe_next(next_path),
        error=error,
        notice=notice,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=LOGIN_COOKIE_SECONDS,
        path="/login",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    throttle: LoginThrottle = request.app.state.login_throttle
    client = client_of(request)
    wait = throttle.wait_seconds(client)
    if wait > 0:
        return render(
            request,
            "error.html",
            status=429,
            title="Too many attempts",
            code=429,
            message=f"Too many failed logins from {client}: try again in {math.ceil(wait)} s.",
            headers={"retry-after": str(math.ceil(wait))},
        )
    form = await read_form(request)
    next_path = form.get("next")
    # Double submit: the form's field must match the nonce cookie of the page it came from;
    # neither may be missing or empty (an empty field matched an absent cookie once).
    if not same_token(form.get("csrf"), request.cookies.get(LOGIN_COOKIE)):
        return login_form(
            request, next_path, status=403, error="The login form expired: please try again."
        )
    token = (form.get("token") or "").strip()
    manager = manager_of(request)
    found = manager.store.tokens.lookup(token) if 0 < len(token) <= MAX_TOKEN_CHARS else None
    if found is None:
        throttle.failed(client)
        manager.store.sessions.refused(client, "invalid or revoked token")
        return login_form(request, next_path, status=401, error="Invalid or revoked token.")
    throttle.succeeded(client)
    settings = settings_of(request)
    manager.store.sessions.purge(idle=settings.web_session_idle_seconds)
    session_id, _info = manager.store.sessions.open(
        found, lifetime=settings.web_session_max_seconds, client=client
    )
    response = RedirectResponse(safe_next(next_path), status_code=303)
    set_session_cookie(response, request, session_id)
    response.delete_cookie(LOGIN_COOKIE, path="/login", httponly=True, samesite="strict")
    return response


@router.post("/logout")
async def logout(request: Request, session: Session, _form: CheckedForm) -> Response:
    manager_of(request).store.sessions.close(session.info)
    response = RedirectResponse("/login?ended=1", status_code=303)
    clear_session_cookie(response, request)
    return response
