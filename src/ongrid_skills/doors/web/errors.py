"""Errors → HTML pages, in one place: the status of each error code, the login redirect.

Routes raise :class:`~ongrid_skills.errors.SkillError` subclasses (the gate's ``Forbidden``, the
registry's ``NotFound``…) or ``sessions.LoginRequired``, and never build an error page themselves.
Statuses are the REST door's for the same codes (SPEC §9): one table,
:mod:`ongrid_skills.doors.statuses`.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import RedirectResponse, Response

from ongrid_skills.doors.statuses import STATUS_BY_CODE
from ongrid_skills.doors.web.sessions import LoginRequired, clear_session_cookie
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import SkillError

LOG = logging.getLogger("ongrid_skills.doors.web")

TITLES = {
    400: "Bad request",
    401: "Not logged in",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Too large",
    429: "Too many attempts",
    500: "Internal error",
    507: "Storage full",
}


def error_page(
    request: Request, status: int, message: str, error_code: str | None = None
) -> Response:
    """The error page: its status, a title, the message (escaped by the template) and, for a
    typed error, its stable code (the REST API's ``error.code``)."""
    return render(
        request,
        "error.html",
        status=status,
        title=TITLES.get(status, "Error"),
        message=message,
        code=status,
        error_code=error_code,
    )


def login_redirect(request: Request) -> str:
    """``/login?next=<where the user was going>`` (a local path only)."""
    target = request.url.path
    if request.url.query:
        target += "?" + request.url.query
    return "/login?next=" + quote(target, safe="/")


def install(app: FastAPI) -> None:
    """Register the handlers that turn every exception into a page."""

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        response: Response
        accepts = request.headers.get("accept", "")
        if request.method in ("GET", "HEAD") and "text/event-stream" not in accepts:
            response = RedirectResponse(login_redirect(request), status_code=303)
        else:
            response = error_page(request, 401, "Your session has ended: log in again.")
        if exc.stale_cookie:
            clear_session_cookie(response, request)
        return response

    @app.exception_handler(SkillError)
    async def skill_error(request: Request, exc: SkillError) -> Response:
        return error_page(request, STATUS_BY_CODE.get(exc.code, 400), exc.message, exc.code)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'/'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in exc.errors()[:5]
        )
        return error_page(request, 400, f"Invalid request: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        response = error_page(request, exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> Response:
        LOG.exception("unhandled error", exc_info=exc)
        return error_page(request, 500, "Internal error; see the manager's log.")
