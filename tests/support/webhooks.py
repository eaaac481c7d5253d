"""An incoming-webhook receiver on loopback, scripted per test: it records every POST (path,
headers, JSON body, arrival time) and answers from its script — a status with headers, or
:data:`HANG` (read the request, then answer nothing until the test ends) — then 200 once the
script is used up. Tests wait on its condition with a deadline, never with a sleep.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.http import QuietHandler, serve

#: The secret part of every test webhook URL (Slack's URLs carry theirs in the path).
SECRET = "T0001/B0002/s3cr3tW3bh00kT0k3n"
HANG = "hang"


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    at: float  # time.monotonic() on arrival


class Receiver:
    """What a scripted receiver got; ``url`` is the webhook URL to configure."""

    def __init__(self, answers: list[Answer | str]) -> None:
        self.answers: deque[Answer | str] = deque(answers)
        self.received: list[Received] = []
        self.changed = threading.Condition()
        self.release = threading.Event()  # set at the end: hanging requests give up
        self.url = ""

    def take(self, received: Received) -> Answer | str:
        with self.changed:
            self.received.append(received)
            self.changed.notify_all()
            return self.answers.popleft() if self.answers else Answer()

    def wait(self, count: int, timeout: float = 15.0) -> list[Received]:
        """The first ``count`` requests, once they have all arrived."""
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.received) >= count, timeout):
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {count} webhook request(s); "
                    f"got {len(self.received)}"
                )
            return list(self.received[:count])

    def bodies(self) -> list[Any]:
        with self.changed:
            return [r.body for r in self.received]


@contextlib.contextmanager
def receiving(*answers: Answer | str) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 that answers ``answers`` in turn, then 200, for the block."""
    receiver = Receiver(list(answers))

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
            got = Received(self.path, dict(self.headers.items()), body, time.monotonic())
            answer = receiver.take(got)
            if answer == HANG:
                receiver.release.wait(60)
                self.close_connection = True
                return
            assert isinstance(answer, Answer)
            self.send_body(answer.status, b"ok", **answer.headers)

    with serve(Handler) as server:
        receiver.url = f"http://127.0.0.1:{server.server_address[1]}/services/{SECRET}?k=q5ecr3t"
        try:
            yield receiver
        finally:
            receiver.release.set()
