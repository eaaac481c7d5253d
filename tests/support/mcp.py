"""The MCP doors under test: a skills tree, personas, tokens, one real `serve`, and MCP sessions
opened with the official client over a real stdio subprocess or real streamable HTTP."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.session import ClientSession, ElicitationFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.processes import venv_bin
from tests.support.server import ServeProcess, start_serve, stop
from tests.support.skills import write_skill

TOKENS = {"admin": Role.ADMIN, "olga": Role.OPERATOR, "oscar": Role.OPERATOR, "vera": Role.VIEWER}

# Skills run with an empty environment: absolute paths for everything not built into sh.
VERBATIM = """#!/bin/sh
cat >/dev/null
printf '{"b": 1,   "a": [1, 2]}\\n'
"""
LISTING = """#!/bin/sh
cat >/dev/null
echo '[1, 2, 3]'
"""
# Emits a stderr line, then a progress line, each time waiting for a file the test creates only
# when the matching notification reached the client: the skill cannot finish unless both were
# forwarded while it ran.
TALKER = """#!/bin/sh
args=$(cat)
dir=$(printf '%s' "$args" | sed -n 's/.*"dir": *"\\([^"]*\\)".*/\\1/p')
echo 'first line' >&2
while [ ! -e "$dir/seen-log" ]; do /bin/sleep 0.01; done
echo '{"progress": 1, "total": 2, "message": "half way"}' >&2
while [ ! -e "$dir/seen-progress" ]; do /bin/sleep 0.01; done
echo '{"done": true}'
"""
FAILS = """#!/bin/sh
cat >/dev/null
echo 'boom' >&2
exit 3
"""
SLOW = """#!/bin/sh
cat >/dev/null
/bin/sleep 30
echo '{}'
"""
# A child and a grandchild in the skill's process group; both pids written for the test.
SLEEPER = """#!/bin/sh
args=$(cat)
dir=$(printf '%s' "$args" | sed -n 's/.*"dir": *"\\([^"]*\\)".*/\\1/p')
/bin/sleep 300 &
echo $! > "$dir/grandchild.pid"
echo $$ > "$dir/child.pid"
echo started >&2
wait
"""
MUTATE = """#!/bin/sh
cat >/dev/null
echo '{"mutated": true}'
"""
STRICT_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer", "minimum": 1},
    },
    "required": ["name", "count"],
    "additionalProperties": False,
}
DIR_SCHEMA = {
    "type": "object",
    "properties": {"dir": {"type": "string"}},
    "required": ["dir"],
}

PERSONAS = {
    "ops": "mutating-with-confirm",
    "root": "dual-sign-required",
}

SAFE = ["fails", "listing", "sleeper", "slow", "strict", "talker", "verbatim"]


def build_tree(base: Path) -> tuple[Path, Path, Path]:
    """Skills (the main root and an initially empty second root) and personas."""
    root, extra, personas = base / "skills", base / "extra", base / "personas"
    for path in (root, extra, personas):
        path.mkdir(parents=True, exist_ok=True)
    write_skill(root, "verbatim", VERBATIM)
    write_skill(root, "listing", LISTING)
    write_skill(root, "talker", TALKER, schema=DIR_SCHEMA, timeout_seconds=20)
    write_skill(root, "fails", FAILS)
    write_skill(root, "slow", SLOW, timeout_seconds=1)
    write_skill(root, "strict", schema=STRICT_SCHEMA)
    write_skill(root, "sleeper", SLEEPER, schema=DIR_SCHEMA, timeout_seconds=60)
    write_skill(root, "mutate", MUTATE, **{"class": "mutating"})
    write_skill(root, "nuke", MUTATE, **{"class": "dangerous"})
    (write_skill(root, "noexec") / "run").chmod(0o644)  # refused by the loader
    for name, mode in PERSONAS.items():
        (personas / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: {name}\nwhen_to_use: tests\n"
            f"permission_mode: {mode}\n---\nYou are {name}.\n"
        )
    return root, extra, personas


#: An ``initialize`` request as a raw client writes it on the wire (one JSON-RPC line).
RAW_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


@dataclass
class World:
    """One data dir shared by a real `serve` and every `ongrid-skills mcp` the tests start."""

    base: Path
    root: Path
    extra: Path
    data: Path
    serve: ServeProcess
    tokens: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)

    def rest(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, self.serve.url + path, headers=headers, timeout=30, **kw)

    def audit(self, action: str) -> list[dict[str, Any]]:
        body = self.rest("GET", "/v1/audit", params={"action": action, "limit": 1000}).json()
        items: list[dict[str, Any]] = body["items"]
        return items


def start_world(base: Path) -> World:
    root, extra, personas = build_tree(base)
    data = base / "data"
    store = open_store(str(data))
    try:
        tokens = {name: store.tokens.create(name, role)[0] for name, role in TOKENS.items()}
    finally:
        store.close()
    env = {
        "PATH": os.environ["PATH"],
        "ONGRID_SKILLS_EXTERNAL_DIRS": f"{root}:{extra}",
        "ONGRID_PERSONAS_DIRS": str(personas),
        "ONGRID_DATA_DIR": str(data),
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    serve = start_serve(data, env)
    return World(base, root, extra, data, serve, tokens, env)


def stop_world(world: World) -> None:
    stop(world.serve)


@dataclass
class Seen:
    """What the client received besides results, in arrival order."""

    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    notifications: list[Any] = field(default_factory=list)
    elicitations: list[types.ElicitRequestParams] = field(default_factory=list)
    list_changed: anyio.Event = field(default_factory=anyio.Event)

    def count(self, kind: type[Any]) -> int:
        return sum(isinstance(n, kind) for n in self.notifications)


def answering(seen: Seen, result: types.ElicitResult) -> ElicitationFnT:
    """An elicitation callback that records the request and answers ``result``."""

    async def callback(
        _ctx: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        seen.elicitations.append(params)
        return result

    return callback


@asynccontextmanager
async def session(
    world: World,
    transport: str,
    *,
    persona: str | None = None,
    token: str = "olga",
    elicit: ElicitationFnT | None = None,
    seen: Seen | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession on ``stdio`` (a fresh `ongrid-skills mcp`) or ``http``."""
    seen = seen if seen is not None else Seen()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.logs.append(params)

    async def on_message(message: Any) -> None:
        seen.notifications.append(message)
        if isinstance(message, types.ToolListChangedNotification):
            seen.list_changed.set()

    async with _streams(world, transport, persona, token) as (read, write):
        client = ClientSession(
            read,
            write,
            read_timeout_seconds=60,
            logging_callback=on_log,
            message_handler=on_message,
            elicitation_callback=elicit,
        )
        async with client:
            await client.initialize()
            yield client


@asynccontextmanager
async def _streams(
    world: World, transport: str, persona: str | None, token: str
) -> AsyncIterator[tuple[Any, Any]]:
    if transport == "stdio":
        args = ["-q", "mcp", *(["--persona", persona] if persona else [])]
        params = StdioServerParameters(command=venv_bin("ongrid-skills"), args=args, env=world.env)
        with open(world.base / "mcp-stderr.log", "a") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams
        return
    url = world.serve.url + "/mcp" + (f"?persona={persona}" if persona else "")
    headers = {"Authorization": f"Bearer {world.tokens.get(token, token)}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def text(result: types.CallToolResult, index: int = 0) -> str:
    block = result.content[index]
    assert isinstance(block, types.TextContent)
    return block.text


def envelope(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    body: dict[str, Any] = json.loads(text(result))
    return body


def mcp_server_pids() -> list[int]:
    """Our `ongrid-skills mcp` children (the stdio client spawns them directly)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"mcp" in argv:
            pids.append(int(entry))
    return pids


def sighup_mcp_servers() -> None:
    for pid in mcp_server_pids():
        os.kill(pid, signal.SIGHUP)


@asynccontextmanager
async def modern_client(
    world: World,
    transport: str,
    *,
    persona: str | None = None,
    elicit: ElicitationFnT | None = None,
    seen: Seen | None = None,
) -> AsyncIterator[Client]:
    """The SDK's high-level Client in its default mode: it negotiates the 2026-07-28 protocol
    (per-request envelopes, input-required round trips, subscriptions/listen)."""
    seen = seen if seen is not None else Seen()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.logs.append(params)

    options: dict[str, Any] = {
        "log_level": "info",
        "logging_callback": on_log,
        "elicitation_callback": elicit,
        "read_timeout_seconds": 60,
    }
    if transport == "stdio":
        args = ["-q", "mcp", *(["--persona", persona] if persona else [])]
        params = StdioServerParameters(command=venv_bin("ongrid-skills"), args=args, env=world.env)
        async with Client(params, **options) as client:
            yield client
        return
    url = world.serve.url + "/mcp" + (f"?persona={persona}" if persona else "")
    headers = {"Authorization": f"Bearer {world.tokens['olga']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client
