"""Failed logins, counted per client address in a sliding window.

Tokens are 256-bit random values, so guessing one is hopeless; the limit is there so that a
client trying anyway cannot fill the audit log (every refused login is audited) or keep the
store's writer busy. A client with :data:`MAX_FAILURES` failures within :data:`WINDOW_SECONDS`
is refused (429) until the oldest of them leaves the window; a successful login clears its
count. Counts live in memory, per process, bounded to :data:`MAX_CLIENTS` addresses.
"""

from __future__ import annotations

import time
from collections import deque

MAX_FAILURES = 10
WINDOW_SECONDS = 300.0
MAX_CLIENTS = 10_000


class LoginThrottle:
    def __init__(self, max_failures: int = MAX_FAILURES, window: float = WINDOW_SECONDS) -> None:
        self.max_failures = max_failures
        self.window = window
        self._failures: dict[str, deque[float]] = {}

    def wait_seconds(self, client: str, now: float | None = None) -> float:
        """How long ``client`` must wait before trying again (0: it may try now)."""
        now = time.monotonic() if now is None else now
        failures = self._failures.get(client)
        if failures is None:
            return 0.0
        while failures and now - failures[0] >= self.window:
            failures.popleft()
        if not failures:
            del self._failures[client]
            return 0.0
        if len(failures) < self.max_failures:
            return 0.0
        return self.window - (now - failures[0])

    def failed(self, client: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if client not in self._failures and len(self._failures) >= MAX_CLIENTS:
            self._failures.clear()  # a flood of addresses: forget them all rather than grow
        self._failures.setdefault(client, deque(maxlen=self.max_failures)).append(now)

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)
