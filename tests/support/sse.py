"""Server-Sent Events read the way a browser reads them: ``event:``, ``id:`` and ``data:``
fields, data lines joined with newlines, comments (``: ping``) kept apart, one event per blank
line; and :class:`StreamWatch`, a stream read in a thread while the test acts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Sse:
    """One event of a stream (``comment`` set, and the rest empty, for a comment line)."""

    event: str
    data: str
    id: str | None = None
    comment: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def read_sse(response: httpx.Response, *, comments: bool = False) -> Iterator[Sse]:
    """The events of ``response`` as they arrive; comment lines too with ``comments``."""
    event, data, ident = "message", [], None
    for line in response.iter_lines():
        if line.startswith(":"):
            if comments:
                yield Sse("", "", comment=line[1:].strip())
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("id:"):
            ident = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and (data or event != "message"):
            yield Sse(event, "\n".join(data), ident)
            event, data, ident = "message", [], None


class StreamWatch(threading.Thread):
    """Reads one stream in a thread of its own: each event with the monotonic time it came,
    ``opened`` set once the answer's head is in, ``closed`` once the stream ended (the server
    closed it, or the connection failed: ``failure``)."""

    def __init__(self, client: httpx.Client, url: str, **kw: Any) -> None:
        super().__init__(daemon=True)
        self.client, self.url, self.kw = client, url, kw
        self.status: int | None = None
        self.events: list[tuple[float, Sse]] = []
        self.failure: Exception | None = None
        self.closed_at: float | None = None
        self.opened = threading.Event()
        self.closed = threading.Event()
        self._changed = threading.Condition()

    def run(self) -> None:
        try:
            with self.client.stream("GET", self.url, **self.kw) as response:
                self.status = response.status_code
                self.opened.set()
                for event in read_sse(response):
                    with self._changed:
                        self.events.append((time.monotonic(), event))
                        self._changed.notify_all()
        except httpx.HTTPError as exc:
            self.failure = exc
        finally:
            self.closed_at = time.monotonic()
            self.opened.set()
            self.closed.set()
            with self._changed:
                self._changed.notify_all()

    def wait_event(self, kind: str, timeout: float = 15.0) -> Sse:
        """The first event of type ``kind``, waiting for it up to ``timeout`` seconds."""

        def found() -> Sse | None:
            return next((e for _, e in self.events if e.event == kind), None)

        with self._changed:
            event = self._changed.wait_for(lambda: found() or self.closed.is_set(), timeout)
            if not isinstance(event, Sse):
                raise AssertionError(f"no {kind!r} event within {timeout} s: {self.kinds()}")
            return event

    def kinds(self) -> list[str]:
        return [event.event for _, event in self.events]

    def after(self, moment: float) -> list[Sse]:
        """The events that came after ``moment`` (a ``time.monotonic()`` value)."""
        return [event for at, event in self.events if at > moment]
