"""Errors → HTTP, in one place: ``{"error": {"code", "message", "details"}}`` with its status.

Routes raise :class:`~ongrid_skills.errors.SkillError` subclasses and never build an error
response themselves; the status of each code comes from :data:`STATUS_BY_CODE`
(:mod:`ongrid_skills.doors.statuses`, shared with the web console; the tree with every code is
drawn in :mod:`ongrid_skills.errors`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ongrid_skills.doors.statuses import STATUS_BY_CODE
from ongrid_skills.errors import SkillError

LOG = logging.getLogger("ongrid_skills.doors.rest")
MAX_BODY_BYTES = 1024 * 1024

CODE_BY_STATUS = {status: code for code, status in STATUS_BY_CODE.items() if status != 500}
CODE_BY_STATUS.update(
    {400: "invalid_request", 403: "forbidden", 409: "conflict", 500: "internal_error"}
)


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: list[Any]


class ErrorBody(BaseModel):
    """Every error answer of the REST door (documented in OpenAPI)."""

    error: ErrorDetail


_MEANING = {
    400: "Malformed request, invalid args, bad Content-Length",
    401: "No valid bearer token",
    403: "The role or the permission gate refuses it",
    404: "No such object",
    409: "The object's state does not allow it",
    413: "Request body over the limit",
    429: "Execution queue full; retry later",
    500: "Internal error; see the manager's log",
    502: "A pack's source or an index could not be fetched, or is not what the index names",
    507: "The store's filesystem is full: nothing was started or recorded",
}


def responses(*statuses: int, public: bool = False) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for a route: the error statuses it may answer besides those of
    every route (400 and 413 from the body limit, 500, and 401 and 507 unless ``public``: any
    authenticated request may write, if only an approval's expiry, so any may find the store
    full)."""
    every = {400, 413, 500} | (set() if public else {401, 507})
    return {
        status: {"model": ErrorBody, "description": _MEANING[status]}
        for status in sorted(every | set(statuses))
    }


def error_body(code: str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    """The error document every REST error answers with."""
    return {"error": {"code": code, "message": message, "details": details or []}}


def error_response(code: str, message: str, details: list[Any] | None = None) -> JSONResponse:
    """The error document with its status (400 for a code the table lacks)."""
    headers = {"WWW-Authenticate": "Bearer"} if code == "unauthorized" else None
    return JSONResponse(
        error_body(code, message, details),
        status_code=STATUS_BY_CODE.get(code, 400),
        headers=headers,
    )


def install(app: FastAPI) -> None:
    """Register the handlers that turn every exception into the error document."""

    @app.exception_handler(SkillError)
    async def skill_error(_request: Request, exc: SkillError) -> JSONResponse:
        body = exc.to_dict()
        return error_response(exc.code, exc.message, body.get("details"))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {
                "pointer": "/" + "/".join(str(p) for p in err.get("loc", ())[1:]),
                "message": err.get("msg", "invalid"),
            }
            for err in exc.errors()
        ]
        summary = "; ".join(f"{d['pointer']}: {d['message']}" for d in details[:5])
        places = {str(err.get("loc", ("body",))[0]) for err in exc.errors()}
        where = "body" if places == {"body"} else "/".join(sorted(places))  # query, header…
        return error_response("invalid_request", f"invalid request {where}: {summary}", details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = CODE_BY_STATUS.get(exc.status_code, "invalid_request")
        response = error_response(code, str(exc.detail))
        response.status_code = exc.status_code
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:  # RFC 9110: a 405 names every method the resource has
            response.headers["Allow"] = allowed_methods(request)
        return response

    @app.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception) -> JSONResponse:
        LOG.exception("unhandled error", exc_info=exc)
        return error_response("internal_error", "internal error; see the manager's log")


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> str:
    """The methods some route fully matches on the request's path. Starlette's own 405 names
    only the first route it matched (GET and POST /v1/agent/runs are two routes)."""
    routes = request.app.router.routes
    return ", ".join(
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    )


class BodyLimit:
    """Refuse request bodies over the limit with 413, by header or by counting the stream.

    ``uploads`` gives a larger limit to ``POST`` on the paths it names (a pack archive)."""

    def __init__(
        self, app: ASGIApp, limit: int = MAX_BODY_BYTES, uploads: dict[str, int] | None = None
    ) -> None:
        self.app = app
        self.default = limit
        self.uploads = uploads or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.default
        if scope["method"] == "POST":
            limit = self.uploads.get(scope["path"], limit)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                # Only ASCII digits: int() would also take "-1", " 5", "+5" and "1_000".
                if not value.isdigit() or len(value) > 19:
                    await _reply(send, 400, "invalid_request", "bad Content-Length")
                    return
                if int(value) > limit:
                    await _reply(send, 413, "too_large", f"request body over {limit} bytes")
                    return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _TooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _reply(send, 413, "too_large", f"request body over {limit} bytes")


class _TooLarge(StarletteHTTPException):
    """Raised from ``receive`` when a body without Content-Length grows over the limit.

    An HTTPException, so that FastAPI's body reader re-raises it as is (any other exception
    there becomes a 400 "error parsing the body") and the handler answers 413 ``too_large``.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps(error_body(code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
