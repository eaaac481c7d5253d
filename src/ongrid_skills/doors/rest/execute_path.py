"""``POST /v1/skills/{name}/execute`` without FastAPI's request machinery, for well-formed bodies.

The execute route is the one the server answers most, and FastAPI's routing, dependency solving
and body handling cost it more CPU than the manager's whole submit path. This ASGI middleware
sits inside the token gate and the body limit (so both have run) and answers the requests it can
answer exactly as the FastAPI route would: a JSON body that parses without a repeated key and
validates as :class:`~ongrid_skills.doors.rest.bodies.ExecuteBody` (the same model, the same
checks), at most one ``Idempotency-Key`` of at most 200 characters. It calls the same
``Manager.submit`` and answers with the same bytes, and a :class:`SkillError` with the same error
document as the door's handler.

Every other request, and every request it cannot answer identically (a body that is not JSON,
names a key twice or fails validation, an odd header), goes on, body replayed untouched, to the
rest of the door (:class:`~ongrid_skills.doors.rest.json_bodies.RefuseDuplicateKeys`, then the
FastAPI route), which builds the error answer: this module never builds one of its own for the
request's shape. The FastAPI route stays the documented one (OpenAPI) and the fallback.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ongrid_skills.doors.rest.bodies import ExecuteBody
from ongrid_skills.doors.rest.errors import error_response
from ongrid_skills.doors.rest.json_bodies import read_body, replay
from ongrid_skills.errors import SkillError
from ongrid_skills.execution.records import Execution
from ongrid_skills.governance.principal import Principal
from ongrid_skills.strict_json import loads

_PREFIX = "/v1/skills/"
_SUFFIX = "/execute"
#: The route's ``Header(max_length=200)``.
MAX_IDEMPOTENCY_KEY = 200


class ExecuteFastPath:
    """ASGI middleware: answer a well-formed execute request itself, pass anything else on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = _skill_name(scope)
        if name is None:
            await self.app(scope, receive, send)
            return
        found = _headers(scope)
        principal = scope.get("state", {}).get("principal")
        if found is None or not isinstance(principal, Principal):
            await self.app(scope, receive, send)
            return
        body, early = await read_body(receive)
        if early is not None:  # the client left: the door answers that
            await self.app(scope, replay(body, receive, early), send)
            return
        parsed = _parse(body)
        if parsed is None:
            await self.app(scope, replay(body, receive), send)
            return
        try:
            execution = await scope["app"].state.manager.submit(
                name,
                parsed.call_args,
                principal=principal,
                persona=parsed.persona,
                confirm=parsed.confirm,
                wait=parsed.wait,
                idempotency_key=found or None,
            )
        except SkillError as exc:  # as errors.install's handler answers it
            response = error_response(exc.code, exc.message, exc.to_dict().get("details"))
            await response(scope, receive, send)
            return
        await send_execution(send, execution)


def _skill_name(scope: Scope) -> str | None:
    """The ``{name}`` of ``POST /v1/skills/{name}/execute`` (one non-empty path segment, as the
    route's pattern takes it), or None for any other request."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    path: str = scope["path"]
    if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
        return None
    name = path[len(_PREFIX) : -len(_SUFFIX)]
    return name if name and "/" not in name else None


def _headers(scope: Scope) -> str | None:
    """The Idempotency-Key ("" for none), or None when the headers are not the plain case: no
    ``Content-Type: application/json`` (FastAPI parses no body without a JSON content type), two
    keys, or one longer than the route takes."""
    key: str | None = None
    media: bytes | None = None
    for header, value in scope["headers"]:
        if header == b"content-type":
            if media is not None:
                return None
            media = value.split(b";", 1)[0].strip().lower()
        elif header == b"idempotency-key":
            if key is not None:
                return None
            key = value.decode("latin-1")
            if len(key) > MAX_IDEMPOTENCY_KEY:
                return None
    return (key or "") if media == b"application/json" else None


def _parse(body: bytes) -> ExecuteBody | None:
    """The body as the route's model, or None when the route must answer it (not JSON, a
    repeated key, invalid)."""
    if not body:
        return None
    try:
        return ExecuteBody.model_validate(loads(body))
    except (ValueError, RecursionError, ValidationError):  # DuplicateKey is a ValueError
        return None


async def send_execution(send: Send, execution: Execution) -> None:
    """The route's answer (``routes.execution_response``): the Execution's JSON, 200 once final,
    202 while pending or running; the headers Starlette's ``Response`` would send."""
    payload = execution.to_json().encode()
    start: Message = {
        "type": "http.response.start",
        "status": 200 if execution.status.final else 202,
        "headers": [
            (b"content-length", str(len(payload)).encode()),
            (b"content-type", b"application/json"),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": payload})
