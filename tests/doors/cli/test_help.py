"""Help everywhere: every command and every option of the whole command tree says what it does.

The tree is walked, not listed, so a command or option added later without help text fails here.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from ongrid_skills.doors.cli.main import cli


def commands(
    command: click.Command, path: str = "ongrid-skills"
) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, f"{path} {name}")


def test_the_walk_reaches_the_nested_groups() -> None:
    paths = {path for path, _ in commands(cli)}
    for expected in (
        "ongrid-skills run",
        "ongrid-skills token list",
        "ongrid-skills audit list",
        "ongrid-skills approvals list",
        "ongrid-skills executions logs",
        "ongrid-skills approvals watch",
        "ongrid-skills executions cancel",
    ):
        assert expected in paths


def test_every_command_has_help_text() -> None:
    missing = [path for path, command in commands(cli) if not (command.help or "").strip()]
    assert missing == []


def test_every_option_has_help_text() -> None:
    missing = [
        f"{path} {'/'.join(param.opts)}"
        for path, command in commands(cli)
        for param in command.params
        if isinstance(param, click.Option)
        and "--help" not in param.opts
        and not (param.help or "").strip()
    ]
    assert missing == []
