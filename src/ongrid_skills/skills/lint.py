"""``ongrid-skills validate``: lint skill.json and persona files, ``path:line:col: sev: msg``.

A directory is walked like the loader walks a root (same order, same containment: the directory
given is the allow-list root); a single ``skill.json`` is checked with its own folder as root.
``SKILL.md`` (any letter case) is linted as the loader reads it. A ``*.md`` file that opens with
a ``---`` frontmatter fence is linted as a persona only where personas live: under a persona dir
(``ONGRID_PERSONAS_DIRS``), in a pack's ``agents/`` folder (one that is not inside a skill
folder), or when the file itself is given. Everywhere else — a skill's reference files, a
CLAUDE.md, a README — it is documentation, not a persona. Unknown manifest fields and likely
typos are warnings; names that the loader would skip as duplicates are warnings too.
Linting only reports: it must never register, run or change anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import is_within, read_regular
from ongrid_skills.settings import Settings
from ongrid_skills.skills.bundle import is_skill_file
from ongrid_skills.skills.commands import command_files, load_command
from ongrid_skills.skills.discovery import LoadReport, Walker, not_listed
from ongrid_skills.skills.frontmatter import key_line
from ongrid_skills.skills.persona import load_persona
from ongrid_skills.skills.plugins import PluginPlan, plan_of
from ongrid_skills.skills.skill_json import (
    Location,
    build_skill,
    key_position,
    read_manifest,
    unknown_fields,
)
from ongrid_skills.skills.skill_md import load_skill_md
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS

_NOT_PERSONAS = {"README.md", "CHANGELOG.md"}
PACK_AGENTS = "agents"


@dataclass(frozen=True, slots=True)
class Finding:
    """One lint result, printed as ``path:line:col: severity: message``."""

    path: str
    line: int
    column: int
    severity: str  # error | warning
    message: str
    #: What kind of finding, for callers that weigh some differently (a pack refuses a
    #: duplicate name the loader would merely skip): "duplicate", "persona" or "".
    rule: str = ""
    #: The loader warning's stable code (skills/notices.py), when the finding is one.
    code: str = ""

    def format(self) -> str:
        """``path:line:col: severity: message``, then ``[code]`` for a coded loader warning."""
        coded = f" [{self.code}]" if self.code else ""
        return f"{self.path}:{self.line}:{self.column}: {self.severity}: {self.message}{coded}"


def validate_paths(paths: list[str], persona_dirs: Iterable[str] = ()) -> list[Finding]:
    """Lint ``paths``; ``persona_dirs`` are the configured persona dirs (their ``*.md`` are
    personas)."""
    findings: list[Finding] = []
    seen: dict[str, str] = {}
    personas = [os.path.realpath(p) for p in persona_dirs if os.path.isabs(p)]
    for raw in paths:
        path = os.path.abspath(raw)
        if os.path.isdir(path):
            findings.extend(_validate_dir(path, seen, personas))
        elif os.path.exists(path):
            root = os.path.dirname(path)
            findings.extend(_validate_file(path, os.path.realpath(root), root, seen))
        else:
            findings.append(Finding(path, 1, 1, "error", "no such file or directory"))
    return findings


def _validate_dir(path: str, seen: dict[str, str], personas: list[str]) -> list[Finding]:
    out: list[Finding] = []
    report = LoadReport()
    walker = Walker(lambda _line: None, report)
    for root in walker.roots([path]):
        homes = _PersonaHomes(root.real, personas)
        plan = plan_of(root.real)  # the folder may be a pack or plugin: its manifests count
        for relative, notice in plan.notices:
            shown = os.path.join(root.shown, relative)
            out.append(Finding(shown, 1, 1, "warning", notice.message, code=notice.code))
        for shown, real in walker.files(root, _lintable):
            if _is_persona_candidate(real) and not homes.holds(real):
                continue  # documentation beside skills, not a persona
            if not _is_persona_candidate(real) and not plan.admits(real):
                notice = not_listed()
                out.append(Finding(shown, 1, 1, "warning", notice.message, code=notice.code))
                continue
            found = _validate_file(real, root.real, root.shown, seen, shown=shown)
            out.extend(_as_plugin_agent(f) if plan.is_plugin else f for f in found)
        out.extend(_validate_commands(plan, root.shown, seen))
    for err in report.errors:
        out.append(Finding(err.path, err.line, err.column, "error", err.message))
    for line in report.lines:
        if line.startswith("skip unreadable dir"):
            out.append(Finding(path, 1, 1, "warning", line))
    return out


def _as_plugin_agent(finding: Finding) -> Finding:
    """A plugin's ``agents/*.md`` that is no persona is a Claude Code sub-agent: a warning (as
    a pack install says), not an error."""
    if finding.rule != "persona" or finding.severity != "error":
        return finding
    message = f"{finding.message} (a Claude Code agent, not loaded as a persona)"
    return replace(finding, severity="warning", message=message)


def _validate_commands(plan: PluginPlan, shown_root: str, seen: dict[str, str]) -> list[Finding]:
    """Each Claude Code command file of a plugin, read as the loader reads it."""
    out: list[Finding] = []
    for folder in plan.commands:
        for real in command_files(folder):
            shown = shown_root + real[len(plan.root) :]
            try:
                doc = load_command(
                    real,
                    shown=shown,
                    base_dir=plan.root,
                    source="native",
                    default_timeout=DEFAULT_TIMEOUT_SECONDS,
                )
            except ManifestError as err:
                out.append(Finding(shown, err.line, err.column, "error", err.message))
                continue
            for notice in doc.warnings:
                out.append(Finding(shown, 1, 1, "warning", notice.message, code=notice.code))
            if doc.skill is None:
                continue
            if doc.skill.name in seen:
                message = (
                    f'name "{doc.skill.name}" is already used by {seen[doc.skill.name]}; '
                    "the loader keeps the first one and skips this one"
                )
                out.append(Finding(shown, 1, 1, "warning", message, rule="duplicate"))
            else:
                seen[doc.skill.name] = shown
    return out


def _lintable(name: str) -> bool:
    return (
        name == "skill.json"
        or is_skill_file(name)
        or (name.endswith(".md") and name not in _NOT_PERSONAS)
    )


def _is_persona_candidate(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(".md") and not is_skill_file(name)


class _PersonaHomes:
    """Where ``*.md`` files are personas under one root: the persona dirs, and ``agents/``
    folders of packs (not those inside a skill folder, which hold a skill's own documents)."""

    def __init__(self, root: str, personas: list[str]) -> None:
        self.root = root
        self.personas = personas
        self._skill_dirs: dict[str, bool] = {}

    def holds(self, path: str) -> bool:
        if any(is_within(path, home) for home in self.personas):
            return True
        folder = os.path.dirname(path)
        if os.path.basename(folder) != PACK_AGENTS:
            return False
        current = os.path.dirname(folder)
        while is_within(current, self.root):
            if self._is_skill_dir(current):
                return False
            if current == self.root:
                break
            current = os.path.dirname(current)
        return True

    def _is_skill_dir(self, folder: str) -> bool:
        known = self._skill_dirs.get(folder)
        if known is None:
            try:
                names = os.listdir(folder)
            except OSError:
                names = []
            known = any(n == "skill.json" or is_skill_file(n) for n in names)
            self._skill_dirs[folder] = known
        return known


def _validate_file(
    real: str, root: str, shown_root: str, seen: dict[str, str], shown: str | None = None
) -> list[Finding]:
    shown = shown or real
    if os.path.basename(real) == "skill.json" or real.endswith(".json"):
        return _validate_manifest(real, root, shown_root, seen, shown)
    if is_skill_file(os.path.basename(real)):
        return _validate_skill_md(real, root, shown_root, seen, shown)
    if real.endswith(".md"):
        return _validate_persona(real, shown)
    return [Finding(shown, 1, 1, "error", "not a skill.json or persona file")]


def _validate_manifest(
    real: str, root: str, shown_root: str, seen: dict[str, str], shown: str
) -> list[Finding]:
    try:
        raw, obj = read_manifest(real)
    except ManifestError as err:
        return [Finding(shown, err.line, err.column, "error", err.message)]
    text = raw.decode("utf-8")
    out = []
    for key, message in unknown_fields(obj):
        line, col = key_position(text, key)
        out.append(Finding(shown, line, col, "warning", message))
    try:
        skill = build_skill(obj, Location(shown, os.path.dirname(real), root, shown_root), raw=raw)
    except ManifestError as err:
        line, col = key_position(text, err.field) if err.field else (1, 1)
        out.append(Finding(shown, line, col, "error", err.message))
        return out
    if skill.name in seen:
        line, col = key_position(text, "name")
        out.append(
            Finding(
                shown,
                line,
                col,
                "warning",
                f'name "{skill.name}" is already used by {seen[skill.name]}; '
                "the loader keeps the first one and skips this one",
                rule="duplicate",
            )
        )
    else:
        seen[skill.name] = shown
    return out


def _validate_persona(real: str, shown: str) -> list[Finding]:
    try:
        head = read_regular(real, 4096).decode("utf-8", "replace").lstrip()
    except OSError as exc:
        message = f"cannot read: {exc.strerror or exc}"
        return [Finding(shown, 1, 1, "error", message, rule="persona")]
    if not head.startswith("---"):
        return []  # plain Markdown documentation, not a persona
    try:
        persona = load_persona(real)
    except ManifestError as err:
        line = err.line
        if err.kind == "build" and err.field:
            with open(real, encoding="utf-8", errors="replace") as fh:
                line = key_line(fh.read(), err.field)
        return [
            Finding(shown, line, err.column, "error", f"persona: {err.message}", rule="persona")
        ]
    with open(real, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    out = []
    for warning in persona.warnings:
        key = warning.split("'")[1] if warning.startswith("unknown key") else "name"
        line = key_line(text, key)
        out.append(Finding(shown, line, 1, "warning", f"persona: {warning}", rule="persona"))
    return out


def _validate_skill_md(
    real: str, root: str, shown_root: str, seen: dict[str, str], shown: str
) -> list[Finding]:
    try:
        doc = load_skill_md(
            real, shown=shown, root=root, shown_root=shown_root, config=Settings.load().config
        )
    except ManifestError as err:
        line = err.line
        if err.kind == "build" and err.field:
            line = key_line(_text(real), err.field)
        return [Finding(shown, line, err.column, "error", err.message)]
    text = _text(real)
    out = [
        Finding(shown, key_line(text, n.key), 1, "warning", n.message, code=n.code)
        for n in doc.warnings
    ]
    for skill in doc.skills:
        if not skill.available:
            out.append(
                Finding(
                    shown,
                    1,
                    1,
                    "warning",
                    f"{skill.name} is unavailable here: {skill.unavailable_reason}",
                )
            )
        if skill.name in seen:
            out.append(
                Finding(
                    shown,
                    key_line(text, "name"),
                    1,
                    "warning",
                    f'name "{skill.name}" is already used by {seen[skill.name]}; '
                    "the loader keeps the first one and skips this one",
                    rule="duplicate",
                )
            )
        else:
            seen[skill.name] = shown
    return out


def _text(path: str) -> str:
    try:
        return read_regular(path, 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""
