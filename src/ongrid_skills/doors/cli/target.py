"""Where ``list``, ``show``, ``run`` and ``tools`` go: this machine or a server, by one rule.

The rule (docs/cli.md, "Where a command runs"), the same for the four commands:

1. ``--local`` runs here; ``--server`` (the URL of ``--url``, ``ONGRID_URL`` or the default)
   and ``--url URL`` go to a server. ``--local`` with either is a usage error.
2. Else ``ONGRID_URL`` set (not empty) sends the command to that server…
3. …unless ``-d DIR`` was given: a skills dir names skills on this machine, so the command runs
   here, and one line on stderr says that ``ONGRID_URL`` was not used. ``-d`` with ``--server``
   or ``--url`` contradicts itself and is refused (exit 2).
4. Else the command runs here.

A command that goes to a server says so first, ``→ URL (where the URL came from)`` on stderr
(unless ``-q``; stdout, what scripts read, is unchanged); its errors name the server asked and
how to run here instead (:attr:`Target.footnote`, shown by
:class:`~ongrid_skills.doors.cli.remote.Remote`). The options are stored on the click context
(``expose_value=False``) so that a command's signature stays its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource

from ongrid_skills.doors.cli.context import Context
from ongrid_skills.doors.cli.exits import EXIT_USAGE
from ongrid_skills.doors.cli.remote import DEFAULT_URL

_KEY = "ongrid_skills.target"


@dataclass(frozen=True, slots=True)
class Target:
    """A server (``url``: where, ``origin``: why) or this machine (``url`` None)."""

    url: str | None
    origin: str = ""
    token: str | None = None

    @property
    def footnote(self) -> str:
        """What an error on this server adds: where it looked, how to look here instead."""
        return f"asked {self.url} ({self.origin}); --local uses the skills of this machine"


def _store(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    given = ctx.meta.setdefault(_KEY, {})
    given[param.name or ""] = (value, ctx.get_parameter_source(param.name or ""))


def options(func: Any) -> Any:
    """``--local``, ``--server``, ``--url`` and ``--token`` (with their environment variables)."""
    for option in reversed(
        [
            click.option(
                "--local",
                is_flag=True,
                expose_value=False,
                callback=_store,
                help="Here, on this machine's skills, even with ONGRID_URL set.",
            ),
            click.option(
                "--server",
                is_flag=True,
                expose_value=False,
                callback=_store,
                help=f"On a server: --url, else ONGRID_URL, else {DEFAULT_URL}.",
            ),
            click.option(
                "--url",
                envvar="ONGRID_URL",
                expose_value=False,
                callback=_store,
                help="On this server (ONGRID_URL: the default target when set).",
            ),
            click.option(
                "--token",
                envvar="ONGRID_TOKEN",
                expose_value=False,
                callback=_store,
                help="API token (or ONGRID_TOKEN).",
            ),
        ]
    ):
        func = option(func)
    return func


def refuse(message: str) -> Any:
    click.echo(f"ongrid-skills: {message}", err=True)
    raise SystemExit(EXIT_USAGE)


def choose() -> Target:
    """The target of the running command, by the rule of the module docstring; announced."""
    ctx = click.get_current_context()
    given = ctx.meta.get(_KEY, {})
    local = bool(given.get("local", (False, None))[0])
    server = bool(given.get("server", (False, None))[0])
    url, url_source = given.get("url", (None, None))
    token = given.get("token", (None, None))[0]
    obj = ctx.find_object(Context)
    dirs = obj.skills_dirs if obj is not None else ()
    explicit = url_source is ParameterSource.COMMANDLINE
    if local and (server or explicit):
        refuse(f"--local and {'--server' if server else '--url'} contradict each other")
    if local:
        return Target(None)
    if server or explicit:
        if dirs:
            refuse(
                f"-d names skills on this machine; it cannot go with "
                f"{'--url' if explicit else '--server'}: drop -d, or run here with --local"
            )
        origin = "--url" if explicit else ("ONGRID_URL" if url else "the default URL")
        return announced(Target(url or DEFAULT_URL, origin, token), obj)
    if url:
        if dirs:
            if obj is None or not obj.quiet:
                click.echo(
                    f"ongrid-skills: -d given: running here, not on {url} (ONGRID_URL); "
                    "--server sends it there",
                    err=True,
                )
            return Target(None)
        return announced(Target(url, "ONGRID_URL", token), obj)
    return Target(None)


def announced(target: Target, obj: Context | None) -> Target:
    """Say on stderr where the command goes (not under -q)."""
    if obj is None or not obj.quiet:
        click.echo(f"→ {target.url} ({target.origin})", err=True)
    return target
