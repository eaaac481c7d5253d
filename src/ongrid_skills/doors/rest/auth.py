"""Bearer-token authentication: token → Principal, with a short cache of positive lookups.

Who is calling, only: what that principal may do is the gate's question
(:mod:`ongrid_skills.governance.gate`), asked by the routes and the manager.
"""

from __future__ import annotations

import functools
import re
import time

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ongrid_skills.doors.rest.errors import error_response
from ongrid_skills.doors.stream_guard import RECHECK_SECONDS, guarded, may_stream
from ongrid_skills.errors import Unauthorized
from ongrid_skills.governance.principal import Principal
from ongrid_skills.store import Store
from ongrid_skills.store.tokens import TokenInfo

CACHE_SECONDS = RECHECK_SECONDS
#: What the last event of a stream whose token stopped working says.
REVOKED_STREAM = "the token is no longer valid (revoked): this stream ends"


class Authenticator:
    """Looks tokens up by hash. A revoked token stops working within ``CACHE_SECONDS``."""

    def __init__(self, store: Store, cache_seconds: float = CACHE_SECONDS) -> None:
        self.store = store
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, TokenInfo]] = {}

    def principal(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header; :class:`Unauthorized` otherwise."""
        if not authorization:
            raise Unauthorized("missing Authorization: Bearer <token>")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > 512:
            raise Unauthorized("expected Authorization: Bearer <token>")
        now = time.monotonic()
        cached = self._cache.get(token)
        if cached is not None and now - cached[0] < self.cache_seconds:
            info = cached[1]
        else:
            found = self.store.tokens.lookup(token)
            if found is None:
                self._cache.pop(token, None)
                raise Unauthorized("invalid or revoked token")
            info = found
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[token] = (now, info)
        return Principal(info.name, info.role)

    def still_valid(self, authorization: str | None) -> bool:
        """Whether the header still names a valid token (the cache answers, as for a request)."""
        try:
            self.principal(authorization)
        except Unauthorized:
            return False
        return True

    def forget(self) -> None:
        """Empty the cache, so that a revocation takes effect at once."""
        self._cache.clear()


#: Paths served without a token: liveness only (the web UI adds its login page and assets).
PUBLIC_PATHS = frozenset({"/v1/health"})
#: Alert deliveries carry their trigger's own token, which the route checks (docs/triggers.md).
TRIGGER_DELIVERY = re.compile(r"/v1/triggers/[^/]{1,64}")


def is_trigger_delivery(method: str, path: str) -> bool:
    """``POST /v1/triggers/{name}``: left by the gate to the route, which checks its token."""
    return method == "POST" and TRIGGER_DELIVERY.fullmatch(path) is not None


class AuthGate:
    """Refuse unauthenticated requests before anything else runs (body parsing included), so a
    caller without a valid token always gets 401, whatever it sends; and end an answer that
    streams (SSE, MCP's streams) once its token stops working
    (:mod:`ongrid_skills.doors.stream_guard`)."""

    def __init__(self, app: ASGIApp, public: frozenset[str] = PUBLIC_PATHS) -> None:
        self.app = app
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] in self.public
            or is_trigger_delivery(scope["method"], scope["path"])  # its own token, checked there
        ):
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        auth: Authenticator = scope["app"].state.auth
        try:
            principal = auth.principal(header)
        except Unauthorized as exc:
            response = error_response(exc.code, exc.message)
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        if not may_stream(scope):
            await self.app(scope, receive, send)
            return
        still_valid = functools.partial(auth.still_valid, header)
        await guarded(self.app, scope, receive, send, still_valid, REVOKED_STREAM)


async def request_principal(request: Request) -> Principal:
    """Async on purpose: FastAPI runs sync dependencies in a worker thread (a costly hop)."""
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:  # the gate did not run (an app assembled without it)
        auth: Authenticator = request.app.state.auth
        principal = auth.principal(request.headers.get("authorization"))
    return principal
