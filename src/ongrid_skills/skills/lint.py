"""``ongrid-skills validate``: lint skill.json and persona files, ``path:line:col: sev: msg``.

A directory is walked like the loader walks a root (same order, same containment: the directory
given is the allow-list root); a single ``skill.json`` is checked with its own folder as root.
Any ``*.md`` file that opens with a ``---`` frontmatter fence (other than SKILL.md and README.md)
is linted as a persona. Unknown manifest fields and likely typos are warnings; names that the
loader would skip as duplicates are warnings too. Linting only reports: it must never register,
run or change anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import read_regular
from ongrid_skills.settings import Settings
from ongrid_skills.skills.discovery import LoadReport, Walker
from ongrid_skills.skills.frontmatter import key_line
from ongrid_skills.skills.persona import load_persona
from ongrid_skills.skills.skill_json import (
    Location,
    build_skill,
    key_position,
    read_manifest,
    unknown_fields,
)
from ongrid_skills.skills.skill_md import load_skill_md

_NOT_PERSONAS = {"SKILL.md", "README.md", "CHANGELOG.md"}
SKILL_MD = "SKILL.md"


@dataclass(frozen=True, slots=True)
class Finding:
    """One lint result, printed as ``path:line:col: severity: message``."""

    path: str
    line: int
    column: int
    severity: str  # error | warning
    message: str

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.severity}: {self.message}"


def validate_paths(paths: list[str]) -> list[Finding]:
    """Lint every file or directory given; duplicate names are found across all of them."""
    findings: list[Finding] = []
    seen: dict[str, str] = {}
    for raw in paths:
        path = os.path.abspath(raw)
        if os.path.isdir(path):
            findings.extend(_validate_dir(path, seen))
        elif os.path.exists(path):
            root = os.path.dirname(path)
            findings.extend(_validate_file(path, os.path.realpath(root), root, seen))
        else:
            findings.append(Finding(path, 1, 1, "error", "no such file or directory"))
    return findings


def _validate_dir(path: str, seen: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []
    report = LoadReport()
    walker = Walker(lambda _line: None, report)
    for root in walker.roots([path]):
        for shown, real in walker.files(root, _lintable):
            out.extend(_validate_file(real, root.real, root.shown, seen, shown=shown))
    for err in report.errors:
        out.append(Finding(err.path, err.line, err.column, "error", err.message))
    for line in report.lines:
        if line.startswith("skip unreadable dir"):
            out.append(Finding(path, 1, 1, "warning", line))
    return out


def _lintable(name: str) -> bool:
    return name in ("skill.json", SKILL_MD) or (name.endswith(".md") and name not in _NOT_PERSONAS)


def _validate_file(
    real: str, root: str, shown_root: str, seen: dict[str, str], shown: str | None = None
) -> list[Finding]:
    shown = shown or real
    if os.path.basename(real) == "skill.json" or real.endswith(".json"):
        return _validate_manifest(real, root, shown_root, seen, shown)
    if os.path.basename(real) == SKILL_MD:
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
        skill = build_skill(obj, Location(shown, os.path.dirname(real), root, shown_root))
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
            )
        )
    else:
        seen[skill.name] = shown
    return out


def _validate_persona(real: str, shown: str) -> list[Finding]:
    try:
        head = read_regular(real, 4096).decode("utf-8", "replace").lstrip()
    except OSError as exc:
        return [Finding(shown, 1, 1, "error", f"cannot read: {exc.strerror or exc}")]
    if not head.startswith("---"):
        return []  # plain Markdown documentation, not a persona
    try:
        persona = load_persona(real)
    except ManifestError as err:
        line = err.line
        if err.kind == "build" and err.field:
            with open(real, encoding="utf-8", errors="replace") as fh:
                line = key_line(fh.read(), err.field)
        return [Finding(shown, line, err.column, "error", f"persona: {err.message}")]
    with open(real, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    out = []
    for warning in persona.warnings:
        key = warning.split("'")[1] if warning.startswith("unknown key") else "name"
        out.append(Finding(shown, key_line(text, key), 1, "warning", f"persona: {warning}"))
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
    out = [Finding(shown, key_line(text, key), 1, "warning", msg) for key, msg in doc.warnings]
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
