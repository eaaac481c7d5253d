"""The webhook sender: approval events POSTed to ``ONGRID_APPROVAL_WEBHOOKS``, asynchronously.

Each URL has its own bounded queue and one worker, so a receiver that is slow, dead or hanging
delays only its own messages (which keep their order), never the desk, the call or the other
URLs. :meth:`WebhookNotifier.notify` (the desk's listener) only queues; on a full queue the
oldest message is dropped and the drop audited. A delivery is one POST with a total timeout,
retried on connection errors, timeouts, 5xx and 429 with exponential backoff and jitter (a
``Retry-After`` is honoured up to the cap); any other answer ends it. Every outcome is an audit
entry: ``webhook.delivered``, ``webhook.failed`` or ``webhook.dropped``.

A webhook URL may carry its secret in the path or the query (Slack's do), so a URL is never
logged, audited or put in an error whole: only its :func:`url_label` (scheme, host, a short
hash). httpx logs each request's URL at INFO; a filter on its logger swaps ours for the label.
This module must never raise into the desk, and never block it.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import json
import logging
import random
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import httpx

from ongrid_skills.errors import ConfigError
from ongrid_skills.notify.events import ApprovalEvent, Notice
from ongrid_skills.notify.messages import message
from ongrid_skills.store import Store

LOG = logging.getLogger("ongrid_skills.notify")


@dataclass(frozen=True, slots=True)
class Delivery:
    """How hard to try: ``attempts`` POSTs at most, each within ``timeout`` seconds; between
    them ``backoff`` × 2ⁿ seconds (half of it to all of it, at random), at most ``max_delay``,
    which also caps a ``Retry-After``. ``queue_size`` messages wait per URL; on close, what is
    still queued or under way gets ``drain_seconds`` to finish."""

    attempts: int = 5
    timeout: float = 10.0
    backoff: float = 1.0
    max_delay: float = 60.0
    queue_size: int = 100
    drain_seconds: float = 3.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """The pause after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        step = min(self.max_delay, self.backoff * 2 ** (attempt - 1))
        # Jitter: receivers back from an outage are not hit by every sender at the same instant.
        return rng.uniform(step / 2, step)


def url_label(url: str) -> str:
    """What logs and the audit show of a webhook URL: scheme, host and port, and the first 8 hex
    digits of the SHA-256 of the whole URL (tells two URLs on one host apart, reveals nothing)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    with contextlib.suppress(ValueError):
        host += f":{parts.port}" if parts.port else ""
    digest = hashlib.sha256(url.encode()).hexdigest()[:8]
    return f"{parts.scheme.lower()}://{host} #{digest}"


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A ``Retry-After`` header (seconds, or an HTTP date) as seconds from ``now``; None if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


@dataclass(eq=False)
class _Target:
    url: str
    label: str
    queue: deque[ApprovalEvent | Notice] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    current: ApprovalEvent | Notice | None = None  # the message under way
    attempts: int = 0  # of the message under way
    task: asyncio.Task[None] | None = None


class _HideUrls(logging.Filter):
    """On httpx's logger: our URLs in a record's arguments become their labels."""

    def __init__(self, labels: dict[httpx.URL, str]) -> None:
        super().__init__()
        self.labels = labels

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self.labels.get(arg, arg) if isinstance(arg, httpx.URL) else arg
                for arg in record.args
            )
        return True


class WebhookNotifier:
    """Sends every approval event to every URL; :meth:`notify` is the desk's listener.

    :meth:`start` on the event loop that runs the manager, :meth:`close` before the store
    closes (the last outcomes are audited)."""

    def __init__(
        self,
        urls: Iterable[str],
        public_url: str,
        store: Store,
        *,
        delivery: Delivery | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.public_url = public_url.rstrip("/")
        self.store = store
        self.delivery = delivery or Delivery()
        self.rng = rng or random.Random()
        self.targets = [_Target(url, url_label(url)) for url in urls]
        self._hide = _HideUrls({_parsed(t): t.label for t in self.targets})
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0
        self._closed = False

    async def start(self) -> None:
        """Open the HTTP client and start one worker per URL on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        logging.getLogger("httpx").addFilter(self._hide)
        self._client = httpx.AsyncClient(
            follow_redirects=False,  # a redirect is an answer to fix in the settings, not follow
            timeout=self.delivery.timeout,
            headers={"User-Agent": "ongrid-skills", "Content-Type": "application/json"},
        )
        for target in self.targets:
            target.task = self._loop.create_task(self._work(target))

    # ---- the desk's side: queue and return ------------------------------------------------
    def notify(self, event: ApprovalEvent | Notice) -> None:
        """Queue ``event`` for every URL and return at once (from any thread)."""
        if self._closed or self._loop is None:
            return
        if threading.get_ident() != self._thread:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._enqueue, event)
            return
        self._enqueue(event)

    def post(self, notice: Notice) -> None:
        """Queue a :class:`Notice` (a trigger's or schedule's outcome) like an event."""
        self.notify(notice)

    def _enqueue(self, event: ApprovalEvent | Notice) -> None:
        if self._closed:  # handed over from another thread while closing
            return
        for target in self.targets:
            if len(target.queue) >= self.delivery.queue_size:
                # Drop the oldest: the newest says where the request stands now. Audited after
                # this returns, so the caller's path never waits on the store.
                dropped = target.queue.popleft()
                reason = f"the queue of {self.delivery.queue_size} messages was full"
                self._audit_drop_soon(target, dropped, reason)
            target.queue.append(event)
            target.wake.set()

    def _audit_drop_soon(self, target: _Target, event: ApprovalEvent | Notice, reason: str) -> None:
        assert self._loop is not None
        outcome = {"attempts": 0, "reason": reason}
        self._loop.call_soon(self._record, "webhook.dropped", target, event, outcome)

    # ---- the workers ----------------------------------------------------------------------
    async def _work(self, target: _Target) -> None:
        while True:
            while not target.queue:
                if self._closed:
                    return
                target.wake.clear()
                await target.wake.wait()
            target.current = target.queue.popleft()
            target.attempts = 0
            try:
                await self._deliver(target, target.current)
            except Exception:  # a worker outlives any one message
                LOG.exception("approval webhook %s: delivery broke", target.label)
            target.current = None

    async def _deliver(self, target: _Target, event: ApprovalEvent | Notice) -> None:
        try:
            built = event.body if isinstance(event, Notice) else message(event, self.public_url)
            body = json.dumps(built, ensure_ascii=False).encode()
        except Exception as exc:  # a message that cannot be built is a failure, not a crash
            self._record("webhook.failed", target, event, {"attempts": 0, "error": repr(exc)})
            return
        while True:
            target.attempts += 1
            status, error, retry_after = await self._post(target, body)
            outcome: dict[str, Any] = {"attempts": target.attempts, "status": status}
            if status is not None and 200 <= status < 300:
                self._record("webhook.delivered", target, event, outcome)
                return
            retryable = status is None or status == 429 or status >= 500
            if not retryable or target.attempts >= self.delivery.attempts:
                LOG.warning(
                    "approval webhook %s: %s not delivered after %d attempt(s): %s",
                    target.label,
                    event.action,
                    target.attempts,
                    error,
                )
                self._record("webhook.failed", target, event, {**outcome, "error": error})
                return
            await asyncio.sleep(self.delivery.delay(target.attempts, retry_after, self.rng))

    async def _post(self, target: _Target, body: bytes) -> tuple[int | None, str, float | None]:
        """One POST: (status or None, what went wrong, Retry-After seconds). The answer's body is
        never read: a receiver cannot make us hold a large one."""
        assert self._client is not None
        timeout = self.delivery.timeout
        try:
            # The total deadline: httpx's own timeout is per read, which a receiver trickling
            # bytes would never reach.
            async with (
                asyncio.timeout(timeout),
                self._client.stream("POST", target.url, content=body) as response,
            ):
                status = response.status_code
                retry_after = retry_after_seconds(response.headers.get("retry-after"), time.time())
        except (TimeoutError, httpx.TimeoutException):
            return None, f"no answer within {timeout:g} s", None
        except Exception as exc:  # connection refused, reset, TLS, DNS…: all worth a retry
            return None, _describe(exc, target.url), None
        return status, f"HTTP {status}", retry_after

    def _record(
        self, action: str, target: _Target, event: ApprovalEvent | Notice, outcome: dict[str, Any]
    ) -> None:
        """One audit entry for one outcome; a store that fails is logged, nothing more."""
        if action == "webhook.dropped":
            LOG.warning(
                "approval webhook %s: %s dropped: %s", target.label, event.action, outcome["reason"]
            )
        if isinstance(event, Notice):
            subject, execution_id = event.subject, event.execution_id
        else:
            subject, execution_id = event.approval.id, event.approval.execution_id
        data = {"url": target.label, "event": event.action, "execution_id": execution_id, **outcome}
        try:
            with self.store.tx() as conn:
                self.store.audit.append(conn, "manager", action, subject, data)
        except Exception as exc:
            LOG.error("approval webhook %s: %s not audited: %s", target.label, action, exc)

    # ---- the end --------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop taking events; give what is queued or under way ``drain_seconds``, then drop
        (and audit) the rest; close the client."""
        if self._closed:
            return
        self._closed = True
        tasks = [t.task for t in self.targets if t.task is not None]
        for target in self.targets:
            target.wake.set()
        try:
            if tasks:
                _done, late = await asyncio.wait(tasks, timeout=self.delivery.drain_seconds)
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
            for target in self.targets:
                left = ([target.current] if target.current else []) + list(target.queue)
                target.queue.clear()
                for number, event in enumerate(left):
                    attempts = target.attempts if number == 0 and target.current else 0
                    self._record(
                        "webhook.dropped",
                        target,
                        event,
                        {"attempts": attempts, "reason": "the manager stopped first"},
                    )
                target.current = None
        finally:
            if self._client is not None:
                await self._client.aclose()
            logging.getLogger("httpx").removeFilter(self._hide)


def _parsed(target: _Target) -> httpx.URL:
    try:
        return httpx.URL(target.url)
    except httpx.InvalidURL:
        raise ConfigError(f"approval webhook {target.label} is not a valid URL") from None


def _describe(exc: Exception, url: str) -> str:
    """An exception as an audit line: its type and message, without the URL or its path."""
    text = str(exc) or type(exc).__name__
    parts = urllib.parse.urlsplit(url)
    for secret in (url, parts.query, parts.path if len(parts.path) > 1 else ""):
        if secret:
            text = text.replace(secret, "…")
    return f"{type(exc).__name__}: {text}"[:200]
