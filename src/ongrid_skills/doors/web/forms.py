"""Form posts: the one way the console changes anything.

A route that changes state takes the :data:`CheckedForm` dependency. It gives the posted fields
only after three checks: a logged-in session (``sessions.Session``), a request from our own
origin (``security.cross_site_problem``; the app's ``SameOriginGuard`` has refused the obvious
cases already), and the session's CSRF token in the ``csrf`` field or the ``X-CSRF-Token``
header (a page's own script), compared in constant time. ``tests/doors/web`` checks that every
web route with an unsafe method depends on it (the login form has its own check).

Bodies are ``application/x-www-form-urlencoded`` only (no multipart: no file is ever uploaded
here), at most :data:`MAX_FORM_BYTES`, UTF-8, at most :data:`MAX_FIELDS` fields.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import Depends, Request

from ongrid_skills.doors.web.security import cross_site_problem, same_token
from ongrid_skills.doors.web.sessions import WebSession, current_session
from ongrid_skills.errors import Forbidden, InvalidRequest, TooLarge

MAX_FORM_BYTES = 64 * 1024
MAX_FIELDS = 200
FORM_TYPE = "application/x-www-form-urlencoded"


class Form:
    """Posted fields; a field given twice is refused rather than guessed at."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def get(self, name: str, default: str | None = None) -> str | None:
        values = [value for key, value in self.pairs if key == name]
        if len(values) > 1:
            raise InvalidRequest(f"the field {name!r} was sent {len(values)} times")
        return values[0] if values else default

    def all(self, name: str) -> list[str]:
        """Every value of a field that may repeat (a multiple select, checkboxes)."""
        return [value for key, value in self.pairs if key == name]


async def read_form(request: Request) -> Form:
    """The posted form, read with the limits above (an empty body is an empty form);
    InvalidRequest or TooLarge otherwise."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise TooLarge(f"form over {MAX_FORM_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise TooLarge(f"form over {MAX_FORM_BYTES} bytes")
    if not body:
        return Form([])
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != FORM_TYPE:
        raise InvalidRequest(f"expected a form ({FORM_TYPE})")
    try:
        text = body.decode("ascii")  # a urlencoded body is ASCII; UTF-8 hides in %XX escapes
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=False,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the form is not valid UTF-8 url-encoded text") from None
    return Form(pairs)


async def checked_form(
    request: Request, session: Annotated[WebSession, Depends(current_session)]
) -> Form:
    """The posted fields of a logged-in user's own page, or 403 (or 401 without a session)."""
    problem = cross_site_problem(request.scope)
    if problem is not None:
        raise Forbidden(problem)
    form = await read_form(request)
    given = request.headers.get("x-csrf-token") or form.get("csrf")
    if not same_token(given, session.csrf):
        raise Forbidden("missing or wrong CSRF token: reload the page and try again")
    return form


#: The dependency of every route that changes state.
CheckedForm = Annotated[Form, Depends(checked_form)]
