"""How the MCP server is reached: stdio for ``ongrid-skills mcp``, streamable HTTP at ``/mcp``.

:func:`serve_stdio` runs one server on this process's stdin/stdout for one local principal.
:class:`McpHttp` holds the server and the SDK's session manager of one ``serve`` lifespan;
:func:`mcp_route` is the route the served app mounts. Over HTTP the principal is the one the
REST door's token gate put on the request, and the persona is the ``?persona=`` query parameter.

This module never authenticates a token (the gate in front of ``/mcp`` does), never imports the
REST or CLI door, and adds no behaviour to the server it serves.
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ongrid_skills.doors.mcp.server import create_mcp_server
from ongrid_skills.doors.mcp.session import Ctx
from ongrid_skills.doors.mcp.stdio import stdio_streams
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager


async def serve_stdio(manager: Manager, principal: Principal, persona: str | None = None) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes stdin."""
    server = create_mcp_server(manager, persona=persona, principal_for=lambda _ctx: principal)
    async with stdio_streams() as streams:
        stdin, stdout = streams if streams is not None else (None, None)
        async with stdio_server(cast(Any, stdin), cast(Any, stdout)) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def _http_principal(ctx: Ctx) -> Principal:
    state = getattr(ctx.request, "state", None)
    principal = getattr(state, "principal", None)
    if not isinstance(principal, Principal):  # the AuthGate always sets it before /mcp
        raise MCPError(types.INVALID_REQUEST, "unauthenticated request")
    return principal


def _http_persona(ctx: Ctx) -> str | None:
    query = getattr(ctx.request, "query_params", None)
    value = query.get("persona") if query is not None else None
    return value or None


class McpHttp:
    """The streamable HTTP door of one app lifespan: its MCP server and session manager."""

    def __init__(self, manager: Manager) -> None:
        self.server = create_mcp_server(
            manager, principal_for=_http_principal, persona_for=_http_persona
        )
        self.sessions = StreamableHTTPSessionManager(app=self.server)

    def run(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Enter for the app's lifetime (inside the FastAPI lifespan)."""
        return self.sessions.run()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One HTTP request to ``/mcp``, made by the principal the token gate recognised."""
        principal = scope.get("state", {}).get("principal")
        if not isinstance(principal, Principal):
            body = {"error": {"code": "unauthorized", "message": "missing bearer token"}}
            await JSONResponse(body, status_code=401)(scope, receive, send)
            return
        # A session belongs to the principal that opened it: the SDK refuses (404) a request for
        # it made with another identity.
        token = AccessToken(token="", client_id=principal.name, scopes=[principal.role.value])
        scope["user"] = AuthenticatedUser(token)
        await self.sessions.handle_request(scope, receive, send)


class McpEndpoint:
    """ASGI endpoint mounted at ``/mcp``; finds the app's :class:`McpHttp` (``app.state.mcp``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        door: McpHttp | None = getattr(scope["app"].state, "mcp", None)
        if door is None:
            body = {"error": {"code": "unavailable", "message": "the MCP door is not running"}}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        await door.handle(scope, receive, send)


def mcp_route(path: str = "/mcp") -> Route:
    """The route ``create_app`` mounts: every method of ``path`` to :class:`McpEndpoint`."""
    return Route(path, McpEndpoint(), include_in_schema=False)
