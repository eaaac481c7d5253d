"""Per-connection state of the MCP door, and telling connections that their tools changed.

Owns what the door remembers about its clients: the log level each connection set
(``logging/setLevel``), which connection lists which view and the fingerprint it last saw, the
``subscriptions/listen`` streams of 2026-era clients, and the ``notifications/tools/list_changed``
sent after a reload to each connection (or stream) whose offered set changed.

It never answers a request about a call and never decides what a view contains: the offer is
:mod:`ongrid_skills.doors.mcp.tools`; the views are only compared here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, get_args

import mcp_types as types
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ongrid_skills.doors.mcp.tools import View, fingerprint, view_tools
from ongrid_skills.skills.registry import Registry

#: The context of one request, on its session.
Ctx = ServerRequestContext[Any, Any]

_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
_MIN_LEVEL = "ongrid_skills.log_level"  # key in Connection.state (logging/setLevel)


def connection_of(ctx: Ctx) -> Connection | None:
    """The handshake-era connection a request came on (None on a per-request 2026 envelope)."""
    # The SDK 2.x does not hand low-level handlers the Connection; its session keeps it private
    # (pinned by mcp>=2.3,<3).
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """``logging/setLevel``: the least severe level this connection wants forwarded."""
    connection = connection_of(ctx)
    if connection is not None:
        connection.state[_MIN_LEVEL] = params.level
    return types.EmptyResult()


def log_levels(ctx: Ctx) -> frozenset[types.LoggingLevel]:
    """The levels this request's client accepts: the protocol's, cut at its ``setLevel``."""
    levels = allowed_log_levels(ctx.protocol_version, ctx.meta)
    connection = connection_of(ctx)
    floor = connection.state.get(_MIN_LEVEL) if connection is not None else None
    if floor in _LEVELS:
        levels = levels & frozenset(_LEVELS[_LEVELS.index(floor) :])
    return levels


@dataclass
class _Peer:
    """A handshake-era connection: whose view it lists, and the fingerprint it last saw."""

    view: View
    seen: str


@dataclass
class _Listen:
    """2026-era ``subscriptions/listen`` streams of one view (persona, role)."""

    handler: ListenHandler
    bus: InMemorySubscriptionBus
    seen: str


@dataclass
class Sessions:
    """The connections and listen streams of one MCP server, for ``list_changed``."""

    peers: dict[Connection, _Peer] = field(default_factory=dict)
    listens: dict[View, _Listen] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def watch(self, ctx: Ctx, view: View, seen: str) -> None:
        """Remember a handshake-era connection for list_changed, until it closes."""
        connection = connection_of(ctx)
        if connection is None:
            return
        if connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # per-request connections; 2026 clients listen with subscriptions/listen
        if connection not in self.peers:
            connection.exit_stack.callback(self.peers.pop, connection, None)
        self.peers[connection] = _Peer(view, seen)

    async def listen(
        self,
        ctx: Ctx,
        params: types.SubscriptionsListenRequestParams,
        view: View,
        registry: Registry,
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: one stream (and bus) per view, shared by its listeners."""
        entry = self.listens.get(view)
        if entry is None:
            bus = InMemorySubscriptionBus()
            seen = fingerprint(view_tools(registry, view))
            entry = self.listens[view] = _Listen(ListenHandler(bus), bus, seen)
        return await entry.handler(ctx, params)

    def on_reload(self, registry: Registry) -> None:
        """The manager's reload listener: announce the changes from the running loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no running loop: nobody to tell
            return
        task = loop.create_task(self._announce(registry))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _announce(self, registry: Registry) -> None:
        """Tell each connection (and listen stream) whose offered set changed."""
        views: dict[View, str] = {}

        def now_of(view: View) -> str:
            if view not in views:
                views[view] = fingerprint(view_tools(registry, view))
            return views[view]

        for connection, peer in list(self.peers.items()):
            now = now_of(peer.view)
            if now != peer.seen:
                peer.seen = now
                await connection.send_tool_list_changed()
        for view, entry in list(self.listens.items()):
            now = now_of(view)
            if now != entry.seen:
                entry.seen = now
                await entry.bus.publish(ToolsListChanged())

    def close(self) -> None:
        """End the listen streams and any announcement still running."""
        for entry in self.listens.values():
            entry.handler.close()
        for task in list(self.tasks):
            task.cancel()
