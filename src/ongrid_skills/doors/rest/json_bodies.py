"""One meaning per request body: a JSON body that names a key twice is refused with 400.

Sits inside the token gate (an unauthenticated body is never parsed) and inside the body limit
(the buffered body is at most 1 MiB). Covers every JSON body the served app receives — the REST
routes and MCP over streamable HTTP alike — before any of them parses it: FastAPI and the MCP SDK
would keep the last of two ``"confirm"`` keys. A body that is not valid JSON passes through
untouched, so each route keeps its own answer for that. It must never change a body it passes.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ongrid_skills.doors.rest.errors import error_body
from ongrid_skills.strict_json import DuplicateKey, loads

_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class RefuseDuplicateKeys:
    """ASGI middleware: buffer a JSON request body, refuse it on a repeated key, else replay it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY or not is_json(scope):
            await self.app(scope, receive, send)
            return
        body, early = await read_body(receive)
        if early is not None:  # the client left: nothing to check
            await self.app(scope, replay(body, receive, early), send)
            return
        if body:
            problem = _duplicate(body)
            if problem is not None:
                await _refuse(send, problem)
                return
        await self.app(scope, replay(body, receive), send)


def is_json(scope: Scope) -> bool:
    """A body FastAPI would parse as JSON: no content type, ``application/json`` or ``+json``."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            return bool(media == b"application/json") or (
                media.startswith(b"application/") and media.endswith(b"+json")
            )
    return True


def _duplicate(body: bytes) -> DuplicateKey | None:
    try:
        loads(body)
    except DuplicateKey as exc:
        return exc
    except (ValueError, RecursionError):  # not JSON: the route answers that itself
        return None
    return None


async def read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The request body, whole; and the message that ended it early (the client left), if
    any: :func:`replay` gives both back to the app, which answers that as it does."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def replay(body: bytes, receive: Receive, pending: Message | None = None) -> Receive:
    """A ``receive`` that gives the buffered body once, then whatever the client sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": pending is not None}
        if pending is not None:
            return pending
        return await receive()

    return replay


async def _refuse(send: Send, problem: DuplicateKey) -> None:
    where = f" at {problem.path}" if problem.path is not None else ""
    position = f" (line {problem.line} column {problem.column})" if problem.line else ""
    message = (
        f"invalid request body: duplicate key {json.dumps(problem.key)}{where}{position}; "
        "a key may appear once per object"
    )
    details = [
        {"pointer": problem.pointer or "", "message": f"duplicate key {json.dumps(problem.key)}"}
    ]
    payload = json.dumps(error_body("invalid_request", message, details)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
