"""Long-lived answers end when their principal does.

A stream is authorised once, when it opens. Without more, a token revoked (or a console session
logged out, expired, or opened with a token since revoked) would go on receiving whatever the
stream carries — new approval requests with their frozen arguments, a call's stderr — for as
long as the client keeps it open. So every request of the served app that :func:`may_stream`
runs under :func:`guarded`, and if its answer turns out to be an event stream
(``text/event-stream``: the REST streams, MCP over streamable HTTP, the console's live parts),
the door's *still valid* question is asked before each chunk it sends, and every
:data:`TICK_SECONDS` while nothing is sent; once the answer is no, the stream gets one last
event and closes::

    event: error
    data: {"error": {"code": "unauthorized", "message": "…"}}

and the client's next request is refused (401) by the door's own check. Answers that are not
streams pay a few microseconds and never ask; requests that cannot stream are not guarded.

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
import logging
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

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


def may_stream(scope: Scope) -> bool:
    """Whether a request may be answered with an event stream: a GET (every stream of the
    REST door and the console; MCP's standalone stream) or a request that accepts one (MCP's
    POSTs must). The others — an execute call above all — are not guarded, and pay nothing."""
    if scope["method"] == "GET":
        return True
    for name, value in scope["headers"]:
        if name == b"accept":
            return b"text/event-stream" in value
    return False


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
    and every ``every`` seconds.

    The app is stopped by cancelling this task through an ``asyncio.timeout`` that has no
    deadline until then: nothing is scheduled for an answer that does not stream. A question
    that fails (the store unreachable) closes the stream without a last event, as a broken
    connection would: the client reconnects and the door answers it as it can."""
    streaming = False
    finished = False
    broken = False
    watcher: asyncio.Task[None] | None = None
    loop = asyncio.get_running_loop()

    def ending() -> bool:
        """Whether the stream is over (asked now, if it is not yet); the app is then
        cancelled at its next await."""
        nonlocal broken
        if deadline.when() is not None:
            return True
        try:
            valid = still_valid()
        except Exception:
            log.warning("could not check the principal of a stream; closing it", exc_info=True)
            valid, broken = False, True
        if not valid:
            deadline.reschedule(loop.time())
        return not valid

    async def checked_send(message: Message) -> None:
        nonlocal streaming, finished, watcher
        if not streaming:
            if message["type"] == "http.response.start" and _is_stream(message):
                streaming = True
                watcher = loop.create_task(watch())
            await send(message)
            return
        if message["type"] == "http.response.body" and ending():
            return  # nothing more goes out
        finished = not message.get("more_body", False)
        await send(message)

    async def watch() -> None:
        while not ending():
            await asyncio.sleep(every)

    try:
        async with asyncio.timeout(None) as deadline:
            await app(scope, receive, checked_send)
    except TimeoutError:
        if not deadline.expired():  # the app's own, not ours
            raise
    finally:
        if watcher is not None:
            watcher.cancel()  # it ends at its next pause; nothing to wait for
    if deadline.expired() and not finished:
        if not broken:
            last = final_event(why)
            await send({"type": "http.response.body", "body": last, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
