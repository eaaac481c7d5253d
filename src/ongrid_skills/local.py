"""A manager on the local data dir, for doors that run without the HTTP server (MCP over stdio,
``chat`` in a terminal): same store, approvals, audit and events as ``serve``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .api.app import registry_builder
from .discovery import LogSink, default_sink
from .manager import Manager
from .metrics import Metrics
from .registry import RegistryHolder
from .settings import Settings
from .store import open_store


@asynccontextmanager
async def local_manager(
    settings: Settings, loader_sink: LogSink = default_sink
) -> AsyncIterator[Manager]:
    """Open the store, load the registry, recover, yield the manager; close everything after."""
    store = open_store(settings.data_dir, settings.database_url)
    holder = RegistryHolder(registry_builder(settings, loader_sink))
    metrics = Metrics()
    metrics.loaded(holder.current)
    manager = Manager(settings, store, holder, metrics=metrics)
    try:
        await manager.recover()
        yield manager
    finally:
        await manager.close()
        store.close()
