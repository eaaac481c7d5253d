"""Shell completion of skill and persona names (click's completion protocol, docs/cli.md).

The shell asks with ``_ONGRID_SKILLS_COMPLETE=bash_complete`` (or ``zsh_complete``,
``fish_complete``) on every Tab; click parses the words typed so far without running any command,
then calls these callbacks. They load the registry of the same dirs a command would (settings,
``--config``, ``-d``), quietly: no loader line, no log line, no store opened, and nothing on
error (a broken config completes nothing rather than printing into the operator's prompt).
"""

from __future__ import annotations

import logging
import os

import click
from click.shell_completion import CompletionItem

from ongrid_skills.doors.cli.output.terminal import one_line
from ongrid_skills.settings import Settings
from ongrid_skills.skills.registry import Registry, build_registry


def skill_names(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The names of the loaded skills that start with ``incomplete``, each with its summary."""
    registry = _quiet_registry(ctx)
    if registry is None:
        return []
    return [
        CompletionItem(skill.name, help=one_line(skill.description, 60))
        for skill in registry.list()
        if skill.name.startswith(incomplete)
    ]


def persona_names(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The names of the loaded personas that start with ``incomplete``."""
    registry = _quiet_registry(ctx)
    if registry is None:
        return []
    return [
        CompletionItem(name) for name in sorted(registry.personas) if name.startswith(incomplete)
    ]


def _quiet_registry(ctx: click.Context) -> Registry | None:
    # The group's callback has not run (completion parses, never invokes): read its options
    # from the parsed parameters, as Context would get them.
    root = ctx.find_root().params
    skills_dirs = tuple(os.path.abspath(d) for d in root.get("skills_dirs") or ())
    logging.disable(logging.CRITICAL)  # a warning printed now would land in the prompt
    try:
        settings = Settings.load(config=root.get("config"))
        return build_registry(
            (*settings.external_dirs, *skills_dirs),
            settings.persona_dirs,
            native_dirs=settings.native_dirs,
            bundled=settings.bundled_skills,
            config=settings.config,
            sink=lambda _line: None,
            default_timeout=settings.default_timeout_seconds,
        )
    except Exception:  # any failure: complete nothing, never a traceback at the prompt
        return None
    finally:
        logging.disable(logging.NOTSET)
