"""A persona written at run time through REST serves MCP clients at once (``?persona=`` over
streamable HTTP, ``--persona`` of an ``ongrid-skills mcp`` of its own on the same data dir),
and each edit sends them ``tools/list_changed``: the server's own clients at once, the other
process's once it reads the stored personas' generation (within about a second)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.support.mcp import Seen, World, session, text


def persona(name: str, tools: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Written at run time.",
        "when_to_use": "In the MCP tests.",
        "tools": tools,
        "prompt": "You list.",
    }


async def changed(seen: Seen) -> None:
    with anyio.fail_after(30):
        await seen.list_changed.wait()
    seen.list_changed = anyio.Event()


def test_a_stored_persona_serves_mcp_and_each_edit_sends_list_changed(
    world: World, transport: str
) -> None:
    name = f"stored_{transport}"
    created = world.rest("POST", "/v1/personas", json=persona(name, ["verbatim"]))
    assert created.status_code == 201, created.text

    async def rest(method: str, body: dict[str, Any] | None = None) -> None:
        def call() -> int:
            kw = {"json": body} if body is not None else {}
            return world.rest(method, f"/v1/personas/{name}", **kw).status_code

        assert await anyio.to_thread.run_sync(call) in (200, 204)

    async def scenario() -> None:
        seen = Seen()
        async with session(world, transport, persona=name, seen=seen) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"verbatim", "get_execution"}
            result = await client.call_tool("verbatim", {})
            assert not result.is_error, text(result)
            assert text(result) == '{"b": 1,   "a": [1, 2]}'
            await rest("PUT", persona(name, ["listing"]))
            await changed(seen)
            assert {t.name for t in (await client.list_tools()).tools} == {
                "listing",
                "get_execution",
            }
            await rest("DELETE")
            await changed(seen)
            with pytest.raises(MCPError, match="unknown persona"):
                await client.list_tools()
            assert seen.count(types.ToolListChangedNotification) == 2

    anyio.run(scenario)
