"""MCP clients are told when a pack changes what they are offered: ``tools/list_changed`` after
``pack install`` and ``pack remove`` run by the command line on the server's data dir, over
stdio (an ``ongrid-skills mcp`` of its own) and over streamable HTTP (``serve``)."""

from __future__ import annotations

import subprocess

import anyio
import mcp_types as types

from tests.support.mcp import VERBATIM, Seen, World, session
from tests.support.packs import write_pack
from tests.support.processes import CLI
from tests.support.skills import write_skill


def cli(world: World, *args: str) -> None:
    done = subprocess.run(
        [CLI, "-q", *args], env=world.env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_pack_install_and_removal_each_send_list_changed(world: World, transport: str) -> None:
    pack_id = f"listed-{transport}"
    tool = f"packed_{transport}"
    folder = write_pack(world.base / pack_id, pack_id, skills=())
    write_skill(folder / "skills", tool, VERBATIM)

    async def changed(seen: Seen) -> None:
        with anyio.fail_after(30):
            await seen.list_changed.wait()
        seen.list_changed = anyio.Event()

    async def scenario() -> None:
        seen = Seen()
        async with session(world, transport, seen=seen) as client:
            assert tool not in {t.name for t in (await client.list_tools()).tools}
            await anyio.to_thread.run_sync(cli, world, "pack", "install", str(folder))
            await changed(seen)
            assert tool in {t.name for t in (await client.list_tools()).tools}
            await anyio.to_thread.run_sync(cli, world, "pack", "remove", pack_id)
            await changed(seen)
            assert tool not in {t.name for t in (await client.list_tools()).tools}
            assert seen.count(types.ToolListChangedNotification) == 2

    anyio.run(scenario)
