"""What a pack holds and whether it is sound: its skills and personas, loaded by the same loader
and judged by the same lint as every other skill (:mod:`ongrid_skills.skills.discovery`,
:mod:`ongrid_skills.skills.lint`).

Every ``skill.json`` and ``SKILL.md`` under the pack's root is a skill of the pack; every
``agents/*.md`` file is a persona. Problems are listed with their path relative to the pack's
root, line and column. Errors (a pack with any is refused):

- every error the lint reports (a manifest that does not parse or build, a bad persona);
- two skills of the pack with the same name (the loader would silently skip one);
- a pack with neither a skill nor a persona;
- a ``requires`` range the running ongrid-skills does not satisfy.

Warnings: the lint's (unknown fields, unavailable skills…), the manifest's, and — in a Claude
Code plugin, whose ``agents/`` hold Claude Code sub-agents rather than personas of ours — an
agent file that is not a persona (it is then not loaded).

It loads into fresh dictionaries; it must never register anything, run a skill or write a file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.errors import PackError, PackProblem
from ongrid_skills.packs.layout import AGENTS_DIR, Detected, Layout
from ongrid_skills.packs.manifest import MANIFEST, requires_problem
from ongrid_skills.skills.discovery import LoadReport, load_personas
from ongrid_skills.skills.lint import Finding, validate_paths
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.pack_load import load_pack_root
from ongrid_skills.skills.persona import Persona


@dataclass(frozen=True, slots=True)
class PackContents:
    """The skills and personas of one pack, the loader's lines, and every problem found."""

    skills: tuple[Skill, ...] = ()
    personas: tuple[Persona, ...] = ()
    loader_lines: tuple[str, ...] = ()
    problems: tuple[PackProblem, ...] = field(default_factory=tuple)

    @property
    def errors(self) -> list[PackProblem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[PackProblem]:
        return [p for p in self.problems if p.severity != "error"]

    @property
    def ok(self) -> bool:
        """True when nothing refuses the pack."""
        return not self.errors

    def skill_names(self) -> list[str]:
        return sorted(skill.name for skill in self.skills)

    def persona_names(self) -> list[str]:
        return sorted(persona.name for persona in self.personas)

    def raise_for_errors(self, label: str) -> None:
        """PackError listing every error, when there is one."""
        if self.errors:
            raise PackError(f"pack {label} is not valid", self.errors)

    def summary(self) -> dict[str, Any]:
        """The contents as JSON: names, and every problem with its place."""
        return {
            "skills": self.skill_names(),
            "personas": self.persona_names(),
            "problems": [p.to_dict() for p in self.problems],
        }


def inspect_pack(
    detected: Detected,
    *,
    config: Mapping[str, str] | None = None,
    ongrid_version: str | None = None,
) -> PackContents:
    """Load and lint the pack ``detected`` describes; ``config`` is the skill config keys that
    decide whether a SKILL.md's requirements are met (default none), ``ongrid_version`` the
    version ``requires`` is checked against (default: the running one)."""
    root = os.path.realpath(detected.root)
    report = LoadReport()
    skills: dict[str, Skill] = {}
    personas: dict[str, Persona] = {}

    def quiet(_line: str) -> None:
        """Lines are kept in the report, not logged: inspecting is not loading."""

    load_pack_root(root, skills, report, quiet, config=config or {})
    agents = os.path.join(root, AGENTS_DIR)
    plugin = detected.layout in (Layout.PLUGIN, Layout.OPENCLAW)
    if os.path.isdir(agents) and not os.path.islink(agents):
        load_personas([agents], personas, report, quiet)
    problems = list(detected.warnings)
    for finding in validate_paths([root]):
        problems.append(_problem(finding, root, plugin))
    if not skills and not personas:
        problems.append(PackProblem(".", "the pack holds no skill and no persona"))
    unmet = requires_problem(detected.manifest.requires, ongrid_version)
    if unmet is not None:
        problems.append(PackProblem(MANIFEST, unmet))
    problems.sort(key=lambda p: (p.severity != "error", p.path, p.line, p.column))
    return PackContents(
        skills=tuple(sorted(skills.values(), key=lambda s: s.name)),
        personas=tuple(sorted(personas.values(), key=lambda p: p.name)),
        loader_lines=tuple(report.lines),
        problems=tuple(problems),
    )


def _problem(finding: Finding, root: str, plugin: bool) -> PackProblem:
    path = relative(finding.path, root)
    severity = finding.severity
    message = finding.message.replace(root + os.sep, "")  # paths inside the pack, relative
    if finding.rule == "duplicate":
        severity = "error"
        message = message.replace(
            "the loader keeps the first one and skips this one", "two skills of a pack share it"
        )
    elif finding.rule == "persona" and plugin and severity == "error":
        severity = "warning"
        message = f"{message} (a Claude Code agent, not loaded as a persona)"
    return PackProblem(path, message, finding.line, finding.column, severity, finding.code)


def relative(path: str, root: str) -> str:
    """``path`` relative to the pack's root, ``/``-separated (``.`` for the root itself)."""
    if path == root:
        return "."
    if path.startswith(root + os.sep):
        return path[len(root) + 1 :].replace(os.sep, "/")
    return path
