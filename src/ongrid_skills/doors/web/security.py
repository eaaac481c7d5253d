"""The console's browser-facing defences: response headers, the same-origin check of unsafe
requests, and the per-session CSRF token.

- :class:`SecurityHeaders` puts the Content-Security-Policy (``default-src 'self'``: no inline
  script or style, nothing from another origin), ``X-Frame-Options: DENY``,
  ``Referrer-Policy: same-origin`` and ``X-Content-Type-Options: nosniff`` on every response of
  the web app, error pages, redirects and static files included.
- :class:`SameOriginGuard` refuses every request with an unsafe method whose ``Sec-Fetch-Site``
  or ``Origin`` says it comes from another site, or from an opaque origin (``Origin: null``: a
  sandboxed frame, a ``data:`` or ``file:`` page), before any route runs.
- :func:`csrf_token` derives the session's CSRF token from its id; each form route checks it
  (``forms.checked_form``), compared in constant time.

Who the caller is and what it may do is decided elsewhere (``sessions``, the gate).
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse

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
    # same-origin, not no-referrer: under no-referrer browsers send ``Origin: null`` with the
    # posts of our own forms, which could then not be told from a sandboxed attacker's.
    (b"referrer-policy", b"same-origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": ":80", "https": ":443"}
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


def origin_of(url: str) -> str:
    """The origin of an absolute URL as browsers write it: scheme and host, and the port unless
    it is the scheme's default."""
    parts = urllib.parse.urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.netloc.rpartition("@")[2].lower()
    return f"{scheme}://{host.removesuffix(DEFAULT_PORTS.get(scheme, '-'))}"


def cross_site_problem(scope: Scope, public_origin: str | None = None) -> str | None:
    """Why an unsafe request must be refused as cross-site, or None. Browsers send
    ``Sec-Fetch-Site`` and ``Origin`` with every POST; a client that sends neither (curl, an old
    browser) is left to the CSRF token. The console's own origin is the one the request was
    addressed to, or ``public_origin`` (``ONGRID_PUBLIC_URL``'s: a proxy in front may change the
    scheme)."""
    headers = Headers(scope=scope)
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() not in OWN_SITES:
        return f"a {site} request may not change anything here"
    origin = headers.get("origin")
    if origin is None:
        return None
    if origin.strip().lower() == "null":  # our pages send their origin (Referrer-Policy above)
        return "the request comes from an opaque origin (null)"
    if origin.lower() not in (own_origin(scope), public_origin):
        return "the request comes from another origin"
    return None


class SameOriginGuard:
    """Refuse (403) an unsafe request that says it comes from another site, before routing."""

    def __init__(self, app: ASGIApp, public_url: str | None = None) -> None:
        self.app = app
        self.public_origin = origin_of(public_url) if public_url else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            problem = cross_site_problem(scope, self.public_origin)
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


def same_token(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison of a submitted token with the expected one; nothing (or an
    empty value) on either side never matches, not even nothing."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
