"""The options accepted at any position: ``--data-dir``, ``-q/--quiet``, ``-v/--verbose``.

``ongrid-skills list -q``, ``ongrid-skills run x -v`` and ``ongrid-skills -q list`` are the same
to a user, so every command (nested groups included, and commands any module registers later)
gets its own copy of these options when the top group resolves it; their callbacks update the
one :class:`~ongrid_skills.doors.cli.context.Context` of the invocation. They never expose a
value to a command's function, so no command has to know about them.
"""

from __future__ import annotations

import click
from click.core import ParameterSource

from ongrid_skills.doors.cli.context import Context


def _context(ctx: click.Context) -> Context:
    """The Context, created by the first option that needs it (the group's options are
    processed before the group's callback runs)."""
    return ctx.ensure_object(Context)


def _given(ctx: click.Context, param: click.Parameter) -> bool:
    return ctx.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE


def _on_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and _given(ctx, param):
        _context(ctx).set_quiet()


def _on_verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value and _given(ctx, param):
        _context(ctx).add_verbose(value)


def _on_data_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    if not value.strip():
        raise click.BadParameter("must not be empty", ctx=ctx, param=param)
    _context(ctx).set_data_dir(value)


def anywhere_options() -> list[click.Option]:
    """Fresh ``--data-dir``, ``-q`` and ``-v`` options, for one command."""
    return [
        click.Option(
            ["--data-dir"],
            type=click.Path(readable=False),  # checked, with the fix to suggest, by Context
            expose_value=False,
            callback=_on_data_dir,
            help="The data dir (store, audit chain), instead of ONGRID_DATA_DIR.",
        ),
        click.Option(
            ["-q", "--quiet"],
            is_flag=True,
            expose_value=False,
            callback=_on_quiet,
            help="No loader summary (nor loader lines).",
        ),
        click.Option(
            ["-v", "--verbose"],
            count=True,
            expose_value=False,
            callback=_on_verbose,
            help="The loader lines and which store is used; -vv: debug logs too.",
        ),
    ]


def add_anywhere(command: click.Command) -> None:
    """Give ``command`` (and, for a group, every command under it) the options accepted at
    any position, unless it already has an option of the same name."""
    taken = {opt for param in command.params for opt in getattr(param, "opts", ())}
    for option in anywhere_options():
        if not taken.intersection(option.opts):
            command.params.append(option)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_anywhere(sub)


class GlobalGroup(click.Group):
    """The top group: a command gets the anywhere-options when it is resolved, so commands
    registered by any module (now or later) accept them, nested groups included."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and not getattr(command, "_anywhere", False):
            add_anywhere(command)
            command._anywhere = True  # type: ignore[attr-defined]
        return name, command, rest
