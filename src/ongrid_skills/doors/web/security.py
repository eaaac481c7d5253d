"""The console's browser-facing defences: response headers, the same-origin check of unsafe
requests, and the per-session CSRF token.

- :class:`SecurityHeaders` puts the Content-Security-Policy (``default-src 'self'``: no inline
  script or style, nothing from another origin), ``X-Frame-Options: DENY``,
  ``Referrer-Policy: no-referrer`` and ``X-Content-Type-Options: nosniff`` on every response of
  the web app, error pages, redirects and static files included.
- :class:`SameOriginGuard` refuses every request with an unsafe method whose ``Sec-Fetch-Site``
  or ``Origin`` says it comes from another site, before any route runs.
- :func:`csrf_token` derives the session's CSRF token from its id; each form route checks it
  (``forms.checked_form``), compared in constant time.

Who the caller is and what it may do is decided elsewhere (``sessions``, the gate).
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: ``default-src 'self'`` is the rule; the other directives close what it leaves open (a
#: ``<base>`` tag, form targets, framing, plugins).
CSP = (
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "object-src 'none'"
)
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Sec-Fetch-Site values of a request a page of ours (or the user, typing) made.
OWN_SITES = frozenset({"same-origin", "none"})


class SecurityHeaders:
    """Add :data:`HEADERS` to every response start that does not already carry them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name for name, _ in message.get("headers", ())}
                extra = [(name, value) for name, value in HEADERS if name not in present]
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


def own_origin(scope: Scope) -> str:
    """The origin this request was addressed to: its scheme and its ``Host`` header."""
    host = Headers(scope=scope).get("host", "")
    return f"{scope.get('scheme', 'http')}://{host}".lower()


def cross_site_problem(scope: Scope) -> str | None:
    """Why an unsafe request must be refused as cross-site, or None. Browsers send
    ``Sec-Fetch-Site`` and ``Origin`` with every POST; a client that sends neither (curl, an old
    browser) is left to the CSRF token."""
    headers = Headers(scope=scope)
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() not in OWN_SITES:
        return f"a {site} request may not change anything here"
    origin = headers.get("origin")
    # "null" says nothing: with our Referrer-Policy (no-referrer) a browser sends it for the
    # posts of our own forms. Sec-Fetch-Site above and the CSRF token still hold.
    if origin is not None and origin != "null" and origin.lower() != own_origin(scope):
        return "the request comes from another origin"
    return None


class SameOriginGuard:
    """Refuse (403) an unsafe request that says it comes from another site, before routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            problem = cross_site_problem(scope)
            if problem is not None:
                await _refuse(send, problem)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, problem: str) -> None:
    body = f"403 Forbidden: {problem}.\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def csrf_token(session_id: str) -> str:
    """The CSRF token of a session: an HMAC of a fixed label keyed by the session id. It can be
    shown in pages, since the id cannot be recovered from it, and needs no storage."""
    return hmac.new(session_id.encode(), b"ongrid-skills csrf", hashlib.sha256).hexdigest()


def same_token(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a submitted token with the expected one."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
