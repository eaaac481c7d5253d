"""What only the stdio door has: the process itself (start-up checks, shutdown with the client)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import anyio

from tests.support.cli import cli_env
from tests.support.mcp import RAW_INITIALIZE, World, mcp_server_pids, session
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


def test_sigterm_leaves_the_clients_pipes_blocking_as_they_were(tmp_path: Path) -> None:
    """The server sets O_NONBLOCK on the descriptions of its stdin and stdout, which it shares
    with whoever else holds them (here this test; a terminal's with its shell). Dying of a
    signal, it must set them back as a normal exit does."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    env = cli_env(ONGRID_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.Popen(
        [venv_bin("ongrid-skills"), "-q", "mcp"],
        stdin=stdin_r,
        stdout=stdout_w,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    try:
        os.write(stdin_w, json.dumps(RAW_INITIALIZE).encode() + b"\n")
        with os.fdopen(os.dup(stdout_r), "rb") as wire:
            assert b'"id":1' in wire.readline()  # serving: the wire is the event loop's now
        assert not os.get_blocking(stdin_r) and not os.get_blocking(stdout_w)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
        assert os.get_blocking(stdin_r) and os.get_blocking(stdout_w)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
            os.close(fd)
