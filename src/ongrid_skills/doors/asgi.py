"""The served application: one ASGI app for ``serve`` — the REST door (``/v1``, its OpenAPI
document and ``/metrics``), MCP over streamable HTTP at ``/mcp`` (both behind the REST door's
token gate), and the web console at every other path, with the manager opened by the runtime
and the agent service beside it (``state.agents`` of both apps: every door drives and follows
agent runs through that one service).

This is the one module that composes doors; the doors themselves never import each other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from ongrid_skills.agent import open_agents
from ongrid_skills.automation import open_automation
from ongrid_skills.doors.pack_changes import upload_limit
from ongrid_skills.doors.rest import build_rest_app
from ongrid_skills.doors.rest.auth import Authenticator
from ongrid_skills.doors.web import build_web_app
from ongrid_skills.execution.runner import Runner
from ongrid_skills.runtime import open_manager, reload_triggers
from ongrid_skills.settings import Settings
from ongrid_skills.skills.discovery import LogSink, default_sink
from ongrid_skills.store import Store

#: The first path segments of the API (REST, its document, metrics, MCP); anything else is
#: the console's (``/docs`` included: the API's reference page, for a console session).
API_SEGMENTS = frozenset({"v1", "mcp", "metrics", "openapi.json"})


def create_app(
    settings: Settings,
    *,
    store: Store | None = None,
    runner: Runner | None = None,
    loader_sink: LogSink = default_sink,
    watch: bool = False,
) -> FastAPI:
    """Build the app. The store opens and the registry loads when the app starts; SIGHUP
    reloads, and with ``watch`` so do file changes under the configured dirs."""
    # The MCP SDK takes about a second to import: only the server pays for it, not every command.
    from ongrid_skills.doors.mcp import McpHttp, mcp_route  # noqa: PLC0415

    web = build_web_app(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_manager(
            settings, store=store, runner=runner, loader_sink=loader_sink
        ) as manager:
            app.state.manager = manager
            app.state.auth = Authenticator(manager.store)
            app.state.mcp = McpHttp(manager)
            web.state.manager = manager
            async with (
                reload_triggers(manager, settings, watch_files=watch),
                app.state.mcp.run(),
                open_agents(manager) as agents,  # closed first: its runs stop before the rest
            ):
                app.state.agents = agents
                web.state.agents = agents
                async with open_automation(manager, agents) as automation:
                    app.state.automation = automation
                    web.state.automation = automation
                    yield

    app = build_rest_app(lifespan, upload_limit=upload_limit(settings))
    app.router.routes.append(mcp_route())  # MCP over streamable HTTP; not in PUBLIC_PATHS
    app.add_middleware(ConsoleFirst, console=web)  # outermost: before the token gate
    app.state.console = web
    web.state.openapi = app.openapi  # the console's /docs renders the REST door's document
    return app


class ConsoleFirst:
    """Hand every request outside :data:`API_SEGMENTS` to the console; the API's requests (and
    the lifespan) go on to the REST app's own stack."""

    def __init__(self, app: ASGIApp, console: ASGIApp) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_api_path(scope["path"]):
            await self.console(scope, receive, send)
            return
        await self.app(scope, receive, send)


def is_api_path(path: str) -> bool:
    """Whether ``path`` belongs to the API (``/v1``, ``/v1/…``, ``/mcp``…), not the console.

    >>> is_api_path("/v1/skills"), is_api_path("/mcp"), is_api_path("/skills"), is_api_path("/")
    (True, True, False, False)
    """
    return path.split("/", 2)[1] in API_SEGMENTS if path.startswith("/") else True
