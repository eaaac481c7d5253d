"""Long-lived answers end when their principal does.

A stream is authorised once, when it opens. Without more, a token revoked (or a console session
logged out, expired, or opened with a token since revoked) would go on receiving whatever the
stream carries — new approval requests with their frozen arguments, a call's stderr — for as
long as the client keeps it open. So every answer of the served app that turns out to be an
event stream (``text/event-stream``: the REST streams, MCP over streamable HTTP, the console's
live parts) runs under :func:`guarded`: it asks its door's *still valid* question before each
chunk it sends, and every :data:`TICK_SECONDS` while nothing is sent; once the answer is no,
the stream gets one last event and closes::

    event: error
    data: {"error": {"code": "unauthorized", "message": "…"}}

and the client's next request is refused (401) by the door's own check. Answers that are not
streams pay one extra call per message and never ask.

Asking is cheap: a door answers from a :class:`Recheck`, a cache per token (or session) that
goes to the store at most once per :data:`RECHECK_SECONDS`, however many streams ask: a stream
ends at most ``RECHECK_SECONDS + TICK_SECONDS`` (3 s) after its principal stopped being valid.
The store is asked, never told, so a revocation made by another process (``token revoke``,
another replica on the same database) is seen within that bound as well.

It imports no door: the REST door's token gate and the console's session middleware each
call it with their own question.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: How long a :class:`Recheck` (and the REST door's token cache) trusts an answer, in seconds.
RECHECK_SECONDS = 2.0
#: Seconds between a stream's questions while it sends nothing.
TICK_SECONDS = 1.0
#: Keys a :class:`Recheck` remembers before it starts afresh.
MAX_REMEMBERED = 10_000


class Recheck:
    """Answers of one yes/no question per key (is this token, this session still valid?), each
    asked of ``ask`` again once it is ``every`` seconds old."""

    def __init__(self, ask: Callable[[str], bool], every: float = RECHECK_SECONDS) -> None:
        self.ask = ask
        self.every = every
        self._answers: dict[str, tuple[float, bool]] = {}

    def __call__(self, key: str) -> bool:
        now = time.monotonic()
        known = self._answers.get(key)
        if known is not None and now - known[0] < self.every:
            return known[1]
        answer = self.ask(key)
        if len(self._answers) >= MAX_REMEMBERED:
            self._answers.clear()
        self._answers[key] = (now, answer)
        return answer


def final_event(message: str) -> bytes:
    """The last event of a stream whose principal is no longer valid."""
    body = {"error": {"code": "unauthorized", "message": message}}
    return f"event: error\r\ndata: {json.dumps(body)}\r\n\r\n".encode()


def _is_stream(message: Message) -> bool:
    for name, value in message.get("headers", ()):
        if name.lower() == b"content-type":
            return bytes(value).startswith(b"text/event-stream")
    return False


async def guarded(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    still_valid: Callable[[], bool],
    why: str,
    every: float = TICK_SECONDS,
) -> None:
    """Run ``app`` for one request; if its answer is an event stream, end the stream (with
    :func:`final_event` saying ``why``) once ``still_valid`` says no: asked before each chunk
    and every ``every`` seconds."""
    streaming = False
    finished = False
    ended = False
    watcher: asyncio.Task[None] | None = None
    cancel = anyio.CancelScope()

    def end() -> None:
        nonlocal ended
        ended = True
        cancel.cancel()

    async def watch() -> None:
        while not ended:
            await asyncio.sleep(every)
            if not still_valid():
                end()

    async def checked_send(message: Message) -> None:
        nonlocal streaming, finished, watcher
        if not streaming:
            if message["type"] == "http.response.start" and _is_stream(message):
                streaming = True
                watcher = asyncio.get_running_loop().create_task(watch())
            await send(message)
            return
        if ended:
            return
        if message["type"] == "http.response.body" and not still_valid():
            end()  # the app is cancelled at its next await; this chunk is not sent
            return
        finished = not message.get("more_body", False)
        await send(message)

    try:
        with cancel:
            await app(scope, receive, checked_send)
    finally:
        if watcher is not None:
            watcher.cancel()  # it ends at its next pause; nothing to wait for
    if ended and not finished:
        await send({"type": "http.response.body", "body": final_event(why), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
