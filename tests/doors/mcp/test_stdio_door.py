"""What only the stdio door has: the process itself (start-up checks, shutdown with the client)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import anyio

from tests.support.mcp import World, mcp_server_pids, session
from tests.support.processes import alive, venv_bin
from tests.support.waiting import until


def test_mcp_refuses_to_start_with_an_unknown_persona(world: World) -> None:
    proc = subprocess.run(
        [venv_bin("ongrid-skills"), "-q", "mcp", "--persona", "nobody"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=world.env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""  # stdout is the MCP wire: never anything else on it
    assert "unknown persona 'nobody'" in proc.stderr


def test_closing_the_client_stops_the_server_and_the_skills_it_runs(
    world: World, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()

    def started() -> bool:
        return all(
            (pids / f).exists() and (pids / f).read_text().strip()
            for f in ("child.pid", "grandchild.pid")
        )

    async def scenario() -> None:
        async with anyio.create_task_group() as tg, session(world, "stdio") as client:

            async def call() -> None:
                with contextlib.suppress(Exception):  # the connection closes under it
                    await client.call_tool("sleeper", {"dir": str(pids)})

            tg.start_soon(call)
            await until(started)
            # Left with the call in flight: the server's stdin closed under it.
        child = int((pids / "child.pid").read_text())
        grandchild = int((pids / "grandchild.pid").read_text())
        await until(lambda: not alive(child) and not alive(grandchild))

    anyio.run(scenario)


def test_sigterm_kills_the_running_skills_and_records_them_interrupted(
    world: World, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()

    def started() -> bool:
        return all(
            (pids / f).exists() and (pids / f).read_text().strip()
            for f in ("child.pid", "grandchild.pid")
        )

    async def scenario() -> None:
        async with session(world, "stdio") as client, anyio.create_task_group() as tg:

            async def call() -> None:
                with contextlib.suppress(Exception):  # the server dies under it
                    await client.call_tool("sleeper", {"dir": str(pids)})

            tg.start_soon(call)
            await until(started)
            (server,) = mcp_server_pids()
            os.kill(server, signal.SIGTERM)
            child = int((pids / "child.pid").read_text())
            grandchild = int((pids / "grandchild.pid").read_text())
            await until(lambda: not alive(child) and not alive(grandchild) and not alive(server))

    anyio.run(scenario)
    latest = world.rest("GET", "/v1/executions", params={"skill": "sleeper", "limit": 1}).json()
    assert latest["items"][0]["status"] == "interrupted"
