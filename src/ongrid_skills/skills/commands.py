"""Claude Code command files (``commands/<name>.md`` of a plugin or pack) → instructions skills.

Each ``commands/**/<name>.md`` becomes the keyword-activated instructions skill
``cmd_<name>`` (the name normalised to snake_case): it is offered when the user's message
holds ``/<name>``, ``<name>`` or its snake alias, and its body is read with ``read_skill`` like
any instructions skill. The frontmatter is optional (Claude Code's is): ``description`` (else
the body's first line), and ``allowed-tools``, ``argument-hint``, ``model``,
``disable-model-invocation`` and any other key kept and shown in ``extra``; ``command`` there
says how it is typed (``/<name>``). Nothing of it runs: ``$ARGUMENTS`` and ``!`` lines are
text the model reads.

A file that cannot be read or whose frontmatter is broken is refused like a SKILL.md (a
loader line, the pack's error); a name that leaves nothing once normalised gets a
``command_skipped`` warning.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ongrid_skills.skills.declared import cap_extra, cap_text
from ongrid_skills.skills.frontmatter import parse_frontmatter, read_text
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.notices import COMMAND_SKIPPED, Notice
from ongrid_skills.skills.schemas import EMPTY_OBJECT_SCHEMA
from ongrid_skills.skills.skill_json import MAX_NAME_LENGTH
from ongrid_skills.skills.skill_md import normalise_name

PREFIX = "cmd_"
CATEGORY = "command"
MAX_COMMAND_FILES = 1000


@dataclass(slots=True)
class CommandDoc:
    """One parsed command file: its skill (None when skipped) and warnings."""

    skill: Skill | None
    warnings: list[Notice]


def command_files(folder: str) -> Iterator[str]:
    """The ``*.md`` files under ``folder`` (or ``folder`` itself when it is one), sorted, depth
    first, never through a symlinked folder, at most :data:`MAX_COMMAND_FILES`."""
    if os.path.isfile(folder):
        if folder.endswith(".md"):
            yield folder
        return
    count = 0
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
        for entry in reversed(entries):
            if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                count += 1
                if count > MAX_COMMAND_FILES:
                    return
                yield entry.path


def command_body(text: str, shown: str) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a command file; no frontmatter: ``{}`` and the whole text."""
    if not text.lstrip().startswith("---"):
        return {}, text
    parsed = parse_frontmatter(text, shown, tolerant=True)
    return parsed.meta, parsed.body


def load_command(
    path: str, *, shown: str, base_dir: str, source: str, default_timeout: int
) -> CommandDoc:
    """Parse one command file (``path`` canonical) into its instructions skill."""
    stem = os.path.splitext(os.path.basename(path))[0]
    warnings: list[Notice] = []
    snake = normalise_name(stem)
    name = PREFIX + snake
    if not snake or len(name) > MAX_NAME_LENGTH:
        why = "no letters or digits" if not snake else f"over {MAX_NAME_LENGTH} characters"
        message = f"command /{stem} skipped: its skill name {name!r} has {why}"
        return CommandDoc(None, [Notice(COMMAND_SKIPPED, "name", message)])
    meta, body = command_body(read_text(path), shown)
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        first = next((line.strip("# \t") for line in body.splitlines() if line.strip()), "")
        description = first or f"Claude Code command /{stem}"
    description = cap_text(description.strip(), "description", warnings)
    extra = {k: v for k, v in meta.items() if k != "description"}
    extra = cap_extra({"command": f"/{stem}", **extra}, warnings)
    keywords = tuple(dict.fromkeys(k.lower() for k in (f"/{stem}", stem, snake)))
    skill = Skill(
        name=name,
        description=description,
        kind="instructions",
        category=CATEGORY,
        source=source,
        schema=dict(EMPTY_OBJECT_SCHEMA),
        timeout_seconds=default_timeout,
        origin=shown,
        activation="keyword",
        keywords=keywords,
        group=name,
        extra=extra,
        declared_name=f"/{stem}",
        aliases=tuple(dict.fromkeys(a for a in (f"/{stem}", stem) if a != name)),
        base_dir=base_dir,
    )
    return CommandDoc(skill, warnings)


def is_command(skill: Skill) -> bool:
    """Whether ``skill`` came from a command file (its body may have no frontmatter)."""
    return skill.category == CATEGORY and skill.kind == "instructions"


__all__ = [
    "CATEGORY",
    "CommandDoc",
    "command_body",
    "command_files",
    "is_command",
    "load_command",
]
