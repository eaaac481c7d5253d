"""The served application: one ASGI app for ``serve`` — the REST door, MCP over streamable HTTP
at ``/mcp`` (both behind the REST door's token gate), with the manager opened by the runtime.

This is the one module that composes doors; the doors themselves never import each other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from ongrid_skills.doors.rest import build_rest_app
from ongrid_skills.doors.rest.auth import Authenticator
from ongrid_skills.execution.runner import Runner
from ongrid_skills.runtime import open_manager, reload_triggers
from ongrid_skills.settings import Settings
from ongrid_skills.skills.discovery import LogSink, default_sink
from ongrid_skills.store import Store


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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_manager(
            settings, store=store, runner=runner, loader_sink=loader_sink
        ) as manager:
            app.state.manager = manager
            app.state.auth = Authenticator(manager.store)
            app.state.mcp = McpHttp(manager)
            async with (
                reload_triggers(manager, settings, watch_files=watch),
                app.state.mcp.run(),
            ):
                yield

    app = build_rest_app(lifespan)
    app.router.routes.append(mcp_route())  # MCP over streamable HTTP; not in PUBLIC_PATHS
    return app
