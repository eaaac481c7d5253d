"""``ongrid-skills mcp``: the MCP door over stdio, on the local data dir (SPEC §10).

stdout is the MCP wire: nothing else may be printed on it (loader lines and logs go to stderr).
The caller is the human running the MCP client on this machine (``mcp:<user>``, role operator);
the persona (``--persona``, default the read-only ``default``) decides what is offered and how
calls are gated. SIGHUP reloads the dirs (``--watch``: on file changes), and connected clients
whose offered tools changed get ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ongrid_skills.doors.cli.eventloop import run_until_done
from ongrid_skills.doors.cli.startup import starting
from ongrid_skills.errors import SkillError
from ongrid_skills.governance.principal import Principal, local_user
from ongrid_skills.settings import Settings
from ongrid_skills.skills.discovery import LogSink
from ongrid_skills.types import Role

if TYPE_CHECKING:  # the manager and the store load only when ``mcp`` runs, not on every command
    from ongrid_skills.manager import Manager

LOG = logging.getLogger("ongrid_skills.mcp")


def register(cli: click.Group) -> None:
    """Add ``mcp`` to the ``ongrid-skills`` command group."""
    cli.add_command(mcp_command)


def mcp_principal() -> Principal:
    """The human local operator running the MCP client on this machine."""
    return Principal(f"mcp:{local_user()}", Role.OPERATOR)


@click.command("mcp")
@click.option("--persona", help="Whose tools are offered and whose mode gates calls.")
@click.option("--watch", is_flag=True, help="Reload when files under the dirs change.")
@click.pass_context
def mcp_command(ctx: click.Context, persona: str | None, watch: bool) -> None:
    """Serve MCP over stdio (for Claude Desktop, Claude Code, any MCP client)."""
    # A data dir that was configured is created on first use; the default ./.ongrid is not
    # (an MCP client may start this in any directory).
    settings: Settings = ctx.obj.store_settings(create=ctx.obj.configured_data_dir())
    extra = tuple(ctx.obj.skills_dirs)
    if extra:
        settings = dataclasses.replace(settings, external_dirs=(*settings.external_dirs, *extra))
    try:
        run_until_done(_serve(settings, persona, watch, ctx.obj.loader_line))
    except SkillError as exc:
        click.echo(f"ongrid-skills: {exc.message}", err=True)
        sys.exit(2)


async def _serve(settings: Settings, persona: str | None, watch: bool, sink: LogSink) -> None:
    with starting():  # see doors.cli.startup
        from ongrid_skills.doors.mcp import serve_stdio  # noqa: PLC0415 - the MCP SDK is slow
        from ongrid_skills.runtime import open_manager, reload_triggers  # noqa: PLC0415

    async with (
        open_manager(settings, loader_sink=sink, guest=True) as manager,
        reload_triggers(manager, settings, watch_files=watch) as background,
    ):
        if persona:
            manager.registry.persona(persona)  # unknown persona: refuse to start
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, _stopper(loop, manager, sig, background))
        await serve_stdio(manager, mcp_principal(), persona)


def _stopper(
    loop: asyncio.AbstractEventLoop,
    manager: Manager,
    sig: signal.Signals,
    background: list[asyncio.Task[None]],
) -> Callable[[], None]:
    def handler() -> None:
        background.append(loop.create_task(_stop(manager, sig)))

    return handler


async def _stop(manager: Manager, sig: signal.Signals) -> None:
    """SIGTERM/SIGINT: stop the running calls (their process groups are killed and they are
    recorded as interrupted), then die of the signal. Waiting for a clean stop of the stdio
    transport is no option: its reader thread blocks on stdin until the client closes it."""
    try:
        await manager.close()
        manager.store.close()
    finally:
        from ongrid_skills.doors.mcp.stdio import release  # noqa: PLC0415 - loaded by _serve

        release()  # the client's pipes (a terminal) blocking again: no finally runs after this
        sys.stderr.flush()
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
