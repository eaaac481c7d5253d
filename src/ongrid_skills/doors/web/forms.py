"""Form posts: the one way the console changes anything.

A route that changes state takes the :data:`CheckedForm` dependency. It gives the posted fields
only after three checks: a logged-in session (``sessions.Session``), a request from our own
origin (``security.cross_site_problem``; the app's ``SameOriginGuard`` has refused the obvious
cases already), and the session's CSRF token in the ``csrf`` field or the ``X-CSRF-Token``
header (a page's own script), compared in constant time. ``tests/doors/web`` checks that every
web route with an unsafe method depends on it (the login form has its own check).

Bodies are ``application/x-www-form-urlencoded``, at most :data:`MAX_FORM_BYTES`, UTF-8, at
most :data:`MAX_FIELDS` fields. The one exception is a pack archive (the packs page): a route
that takes a file takes :data:`CheckedUpload` instead, the same checks on a
``multipart/form-data`` body of at most two files and four fields, counted as it streams
against the REST door's upload limit (``pack_changes.upload_limit``), the CSRF token in a field
like any form's.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from ongrid_skills.doors.pack_changes import upload_limit
from ongrid_skills.doors.web.security import cross_site_problem, origin_of, same_token
from ongrid_skills.doors.web.sessions import WebSession, current_session, settings_of
from ongrid_skills.errors import Forbidden, InvalidRequest, TooLarge

MAX_FORM_BYTES = 64 * 1024
MAX_FIELDS = 200
FORM_TYPE = "application/x-www-form-urlencoded"
UPLOAD_TYPE = "multipart/form-data"
UPLOAD_FILES = 2
UPLOAD_FIELDS = 4


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


def _origin_problem(request: Request) -> str | None:
    """The guard's check again, with the console's public origin (``ONGRID_PUBLIC_URL``)."""
    return cross_site_problem(request.scope, origin_of(settings_of(request).public_url))


def _check_token(request: Request, given: str | None, session: WebSession) -> None:
    if not same_token(request.headers.get("x-csrf-token") or given, session.csrf):
        raise Forbidden("missing or wrong CSRF token: reload the page and try again")


async def checked_form(
    request: Request, session: Annotated[WebSession, Depends(current_session)]
) -> Form:
    """The posted fields of a logged-in user's own page, or 403 (or 401 without a session)."""
    problem = _origin_problem(request)
    if problem is not None:
        raise Forbidden(problem)
    form = await read_form(request)
    _check_token(request, form.get("csrf"), session)
    return form


#: The dependency of every route that changes state.
CheckedForm = Annotated[Form, Depends(checked_form)]


class Upload:
    """A posted multipart form: its fields (each at most once) and its files. The files are
    spooled to temporary files, closed when the request ends."""

    def __init__(self, data: FormData) -> None:
        self.data = data

    def _one(self, name: str) -> str | UploadFile | None:
        values = self.data.getlist(name)
        if len(values) > 1:
            raise InvalidRequest(f"the field {name!r} was sent {len(values)} times")
        return values[0] if values else None

    def field(self, name: str) -> str | None:
        value = self._one(name)
        if isinstance(value, UploadFile):
            raise InvalidRequest(f"the field {name!r} must be text, not a file")
        return value

    def file(self, name: str) -> UploadFile | None:
        """The file of a file input, or None when none was chosen (browsers send an empty part
        without a name for an empty input)."""
        value = self._one(name)
        if value is None:
            return None
        if not isinstance(value, UploadFile):
            raise InvalidRequest(f"the field {name!r} must be a file")
        if not value.filename and not value.size:
            return None
        return value


async def read_upload(request: Request, limit: int) -> Upload:
    """The posted multipart form, at most ``limit`` bytes (by header, and counted as it
    streams: a body without a length is cut off at the limit), :data:`UPLOAD_FILES` files and
    :data:`UPLOAD_FIELDS` fields; InvalidRequest or TooLarge otherwise."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != UPLOAD_TYPE:
        raise InvalidRequest(f"expected an upload ({UPLOAD_TYPE})")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"upload over {limit} bytes")

    async def counted() -> AsyncGenerator[bytes]:
        seen = 0
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                raise TooLarge(f"upload over {limit} bytes")
            yield chunk

    parser = MultiPartParser(
        request.headers, counted(), max_files=UPLOAD_FILES, max_fields=UPLOAD_FIELDS
    )
    try:
        data = await parser.parse()
    except MultiPartException as exc:
        raise InvalidRequest(f"the upload is not a valid form: {exc.message}") from None
    return Upload(data)


async def checked_upload(
    request: Request, session: Annotated[WebSession, Depends(current_session)]
) -> AsyncIterator[Upload]:
    """:func:`checked_form` for a form with files: the upload of a logged-in user's own page,
    or 403 (or 401 without a session). The CSRF token is checked before any file is used."""
    problem = _origin_problem(request)
    if problem is not None:
        raise Forbidden(problem)
    upload = await read_upload(request, upload_limit(settings_of(request)))
    try:
        _check_token(request, upload.field("csrf"), session)
        yield upload
    finally:
        await upload.data.close()


#: The dependency of a route that changes state with files (the only other one).
CheckedUpload = Annotated[Upload, Depends(checked_upload)]
