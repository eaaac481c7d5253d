"""``create_app(settings)``: the FastAPI application with its manager, built per call."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from watchfiles import awatch

from ..discovery import LogSink, default_sink
from ..manager import Manager
from ..metrics import Metrics
from ..registry import Registry, RegistryHolder, build_registry
from ..runner import SubprocessRunner
from ..settings import Settings
from ..store import Store, open_store
from . import errors
from .agent_routes import router as agent_router
from .auth import Authenticator, AuthGate
from .routes import router

LOG = logging.getLogger("ongrid_skills.server")


def registry_builder(settings: Settings, sink: LogSink) -> Callable[[], Registry]:
    """A build function for the RegistryHolder that reports only what changed on reloads."""
    previous: list[str] = []
    previous_names: set[str] = set()

    def build() -> Registry:
        lines: list[str] = []
        registry = build_registry(
            settings.external_dirs,
            settings.persona_dirs,
            native_dirs=settings.native_dirs,
            bundled=settings.bundled_skills,
            config=settings.config,
            sink=lines.append,
            default_timeout=settings.default_timeout_seconds,
        )
        seen = set(previous)
        for line in lines:
            if line not in seen:
                sink(line)
        if previous:
            for name in sorted(previous_names - set(registry.skills)):
                sink(f'skill loader: removed skill "{name}"')
        previous[:] = lines
        previous_names.clear()
        previous_names.update(registry.skills)
        return registry

    return build


def create_app(
    settings: Settings,
    *,
    store: Store | None = None,
    runner: SubprocessRunner | None = None,
    loader_sink: LogSink = default_sink,
    watch: bool = False,
) -> FastAPI:
    """Build the app. The store opens and the registry loads when the app starts."""
    # The MCP SDK takes about a second to import: only the server pays for it, not every command.
    from ..mcp_server import McpHttp, mcp_route  # noqa: PLC0415

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_store = store or open_store(settings.data_dir, settings.database_url)
        holder = RegistryHolder(registry_builder(settings, loader_sink))
        metrics = Metrics()
        metrics.loaded(holder.current)
        manager = Manager(settings, own_store, holder, runner=runner, metrics=metrics)
        app.state.manager = manager
        app.state.auth = Authenticator(own_store)
        app.state.mcp = McpHttp(manager)  # streamable HTTP MCP at /mcp (behind the AuthGate)
        await manager.recover()
        background: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            loop.add_signal_handler(
                signal.SIGHUP, lambda: background.append(loop.create_task(_reload(manager)))
            )
        if watch:
            background.append(loop.create_task(_watch(manager, settings)))
        try:
            async with app.state.mcp.run():
                yield
        finally:
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.remove_signal_handler(signal.SIGHUP)
            for task in background:
                task.cancel()
            await manager.close()
            if store is None:
                own_store.close()

    app = FastAPI(
        title="ongrid-skills",
        version=_version(),
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    errors.install(app)
    app.add_middleware(AuthGate)
    app.add_middleware(errors.BodyLimit)
    app.include_router(router)
    app.include_router(agent_router)
    app.router.routes.append(mcp_route())  # MCP over streamable HTTP; not in PUBLIC_PATHS
    return app


async def _reload(manager: Manager) -> None:
    try:
        await manager.reload("signal:SIGHUP")
    except Exception:
        LOG.exception("reload failed; the previous registry stays in place")


async def _watch(manager: Manager, settings: Settings) -> None:
    dirs = [d for d in (*settings.external_dirs, *settings.persona_dirs) if _is_dir(d)]
    if not dirs:
        return
    async for _changes in awatch(*dirs, debounce=500, recursive=True):
        await _reload(manager)


def _is_dir(path: str) -> bool:
    return os.path.isabs(path) and os.path.isdir(path)


def _version() -> str:
    try:
        return version("ongrid-skills")
    except PackageNotFoundError:  # pragma: no cover
        return "0"
