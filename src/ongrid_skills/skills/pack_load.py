"""Loading one pack root (an installed pack's folder, or one being inspected): its plugin plan
(:mod:`.plugins`), its ``SKILL.md`` and ``skill.json`` skills, then its command files
(:mod:`.commands`), with the same loader lines, report and first-name-wins rule as every root.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.commands import command_files, load_command
from ongrid_skills.skills.discovery import LogSink, Walker, load_external, load_native
from ongrid_skills.skills.load_report import LoadReport
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.plugins import PluginPlan, plan_of
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS


def load_pack_root(
    root: str,
    skills: dict[str, Skill],
    report: LoadReport,
    sink: LogSink | None = None,
    *,
    config: Mapping[str, str],
    source: str = "native",
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
) -> int:
    """Register the skills of the pack at ``root`` into ``skills``; return how many."""
    real = os.path.realpath(root)
    plan = plan_of(real)
    walker = Walker(sink, report, "plugin")
    for relative, notice in plan.notices:
        walker.warn(notice, os.path.join(root, relative))
    admit = plan.admits if plan.skill_dirs is not None else None
    count = load_native(
        [root],
        skills,
        report,
        sink,
        config=config,
        source=source,
        default_timeout=default_timeout,
        admit=admit,
    )
    count += load_commands(plan, root, skills, report, sink, source, default_timeout)
    count += load_external(
        [root], skills, report, sink, source, default_timeout=default_timeout, admit=admit
    )
    return count


def load_commands(
    plan: PluginPlan,
    shown_root: str,
    skills: dict[str, Skill],
    report: LoadReport,
    sink: LogSink | None,
    source: str,
    default_timeout: int,
) -> int:
    """Register the command skills of ``plan``'s command folders."""
    walker = Walker(sink, report, "command")
    count = 0
    for folder in plan.commands:
        for real in command_files(folder):
            shown = shown_root + real[len(plan.root) :]
            try:
                doc = load_command(
                    real,
                    shown=shown,
                    base_dir=plan.root,
                    source=source,
                    default_timeout=default_timeout,
                )
            except ManifestError as err:
                err.path = shown
                walker.refuse(err)
                continue
            for notice in doc.warnings:
                walker.warn(notice, shown, doc.skill.name if doc.skill else None)
            skill = doc.skill
            if skill is None:
                continue
            if skill.name in skills:
                report.duplicates += 1
                message = f'skill "{skill.name}" already registered, skipping {shown}'
                why = f'"{skill.name}" is already registered (the first one found wins)'
                walker.duplicate(skill.name, shown, why, message)
                continue
            skills[skill.name] = skill
            count += 1
            walker.log(f'registered command skill "{skill.name}" from {shown}')
    report.registered += count
    return count
