"""Host skills seen through MCP (SPEC §17): a real `ongrid-skills mcp` on stdio with a fleet, a
worker process joining and leaving; the client is told ``tools/list_changed`` each time, and a
tool call runs on the host it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.fleet import TTL, Fleet, host_skill
from tests.support.processes import venv_bin


def host_enum(tools: types.ListToolsResult, name: str) -> list[str] | None:
    for tool in tools.tools:
        if tool.name == name:
            enum: list[str] = tool.input_schema["properties"]["host"]["enum"]
            return enum
    return None


def test_mcp_clients_hear_the_host_enum_change_and_calls_reach_the_host(
    fleet: Fleet, tmp_path: Path
) -> None:
    skills = tmp_path / "worker-skills"
    host_skill(
        skills, "where_am_i", 'echo "{\\"tag\\": \\"$WORKER_TAG\\"}"', env_allow=["WORKER_TAG"]
    )
    fleet.worker("alpha", skills, WORKER_TAG="A")  # known before the MCP server starts
    env = {
        **fleet.worker_env(),
        **fleet.manager_env(tmp_path / "manager-skills"),
        "ONGRID_DATA_DIR": fleet.settings.data_dir,
    }
    (tmp_path / "manager-skills").mkdir()
    changed = anyio.Event()
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def scenario() -> None:
        nonlocal changed
        params = StdioServerParameters(
            command=venv_bin("ongrid-skills"), args=["-q", "mcp"], env=env
        )
        with (tmp_path / "mcp-stderr.log").open("a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, message_handler=on_message) as client,
            ):
                await client.initialize()
                assert host_enum(await client.list_tools(), "where_am_i") == ["alpha"]
                await anyio.to_thread.run_sync(lambda: fleet.worker("beta", skills, WORKER_TAG="B"))
                with anyio.fail_after(TTL + 20):
                    await changed.wait()
                assert host_enum(await client.list_tools(), "where_am_i") == ["alpha", "beta"]
                result = await client.call_tool("where_am_i", {"host": "beta"})
                assert not result.is_error, result
                block = result.content[0]
                assert isinstance(block, types.TextContent)
                assert json.loads(block.text) == {"tag": "B"}
                changed = anyio.Event()
                await anyio.to_thread.run_sync(fleet.workers[0].stop)  # alpha leaves
                with anyio.fail_after(TTL + 20):
                    await changed.wait()
                assert host_enum(await client.list_tools(), "where_am_i") == ["beta"]

    anyio.run(scenario)
    assert sum(isinstance(m, types.ToolListChangedNotification) for m in seen) == 2
