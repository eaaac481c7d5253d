"""Walking the allow-listed roots: manifests → skills, with the loader's log lines (SPEC §3).

Roots are taken in the order given; inside a root, entries sorted by name, depth first;
symlinked directories are never descended into. Every failure is logged and skipped: one broken
manifest never blocks start-up. The log lines are a contract operators grep for.

It must never descend into a symlinked directory, accept a file that resolves outside its root,
or raise for one bad file.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import is_within
from ongrid_skills.skills.aliases import PackNames
from ongrid_skills.skills.bundle import is_skill_file
from ongrid_skills.skills.load_report import LoaderWarning, LoadReport, Skipped
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.notices import SKILL_NOT_LISTED, Notice
from ongrid_skills.skills.persona import Persona, load_persona
from ongrid_skills.skills.skill_json import Location, build_skill, read_manifest
from ongrid_skills.skills.skill_md import load_skill_md
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS

LOG = logging.getLogger("ongrid_skills.loader")
PREFIX = "skill loader: "
LogSink = Callable[[str], None]
#: Whether a skill file (its canonical path) may load: a plugin's manifest may list its skills.
Admit = Callable[[str], bool]


def not_listed() -> Notice:
    """The warning of a skill file an openclaw plugin's manifest does not list."""
    return Notice(
        SKILL_NOT_LISTED,
        "skills",
        "not under a folder that openclaw.plugin.json lists in skills: not loaded",
    )


#: Why a file or folder was skipped, as stable words a script or a page may rely on (the
#: ``reason`` beside it is for people and may be reworded).
LOAD_CODES: dict[str, str] = {
    "parse_error": "the file is not valid JSON, YAML frontmatter or UTF-8",
    "invalid_manifest": "the file parsed but a field is wrong (``field`` names it when known)",
    "unreadable": "the file cannot be read: permissions, not a regular file, a broken symlink",
    "too_large": "the file is over the size cap",
    "symlink_escapes_root": "a symlinked file resolves outside its allow-listed root",
    "name_taken": "the name is already registered: the first one found wins (not an error)",
    "second_skill_file": "the folder already has its skill file (not an error)",
    "dir_not_absolute": "a configured dir is a relative path",
    "dir_missing": "a configured dir does not exist",
    "dir_not_a_directory": "a configured dir is a file",
    "dir_unreadable": "a dir or folder cannot be listed",
}


def load_code(err: ManifestError) -> str:
    """The stable word for why ``err``'s file was refused."""
    if err.load_code is not None:
        return err.load_code
    return "parse_error" if err.kind == "parse" else "invalid_manifest"


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_control(match: re.Match[str]) -> str:
    char = match.group()
    return _CONTROL_ESCAPES.get(char, f"\\x{ord(char):02x}")


def default_sink(line: str) -> None:
    """Send a loader line to the ``ongrid_skills.loader`` logger at INFO."""
    LOG.info(line)


@dataclass(frozen=True, slots=True)
class Root:
    """One allow-listed root, as shown in loader lines and canonical for containment checks."""

    shown: str  # as the operator wrote it (normalised)
    real: str  # canonical


class Walker:
    """Collects the log lines of one load and forwards them to a sink as they happen."""

    def __init__(self, sink: LogSink | None, report: LoadReport, what: str = "skill.json") -> None:
        self.sink = sink or default_sink
        self.report = report
        self.what = what  # the kind of file this walk loads, for the report's skipped list

    def log(self, message: str) -> None:
        """Record one loader line and pass it to the sink, prefixed."""
        # One line per event, always: a name, entry or path from a manifest or the tree that
        # carries a newline (or any control character) must not forge a second loader line.
        if not message.isprintable():  # the common case skips the regular expression
            message = _CONTROL_RE.sub(_escape_control, message)
        self.report.lines.append(message)
        self.sink(PREFIX + message)

    def roots(self, dirs: list[str]) -> Iterator[Root]:
        """The usable roots among ``dirs``, in order; every one skipped is logged with why."""
        for raw in dirs:
            if not os.path.isabs(raw):
                why = "not an absolute path"
                self.skip_dir(raw, why, f'skip non-absolute dir "{raw}"', "dir_not_absolute")
                continue
            shown = os.path.normpath(raw)
            try:
                st = os.stat(shown)
            except FileNotFoundError:
                message = f"dir {shown} not present, skipping"
                self.skip_dir(shown, "not present", message, "dir_missing")
                continue
            except OSError as exc:
                why = f"cannot be read ({exc.strerror})"
                self.skip_dir(shown, why, f"dir {shown} {why}, skipping", "dir_unreadable")
                continue
            if not stat.S_ISDIR(st.st_mode):
                why = "not a directory"
                message = f"dir {shown} is {why}, skipping"
                self.skip_dir(shown, why, message, "dir_not_a_directory")
                continue
            yield Root(shown, os.path.realpath(shown))

    def files(self, root: Root, match: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
        """(shown path, canonical path) of matching files under root.

        Lexical order, depth first, like Go's ``filepath.Walk``: a folder is entered at its
        place among its siblings.
        """
        stack: list[Iterator[tuple[str, os.DirEntry[str]]]] = []
        top = self._listing(root.shown, root.real)
        if top is not None:
            stack.append(top)
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                continue
            shown, entry = item
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                listing = self._listing(shown, entry.path)
                if listing is not None:
                    stack.append(listing)
            elif match(entry.name):
                real = self._manifest_path(entry, shown, root)
                if real is not None:
                    yield shown, real

    def _listing(
        self, shown_dir: str, real_dir: str
    ) -> Iterator[tuple[str, os.DirEntry[str]]] | None:
        try:
            with os.scandir(real_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            why = f"{exc.strerror or exc}"
            message = f"skip unreadable dir {shown_dir}: {why}"
            self.skip_dir(shown_dir, why, message, "dir_unreadable")
            return None
        if shown_dir == real_dir:  # the usual case: an entry's path is the path shown
            return ((e.path, e) for e in entries)
        return ((os.path.join(shown_dir, e.name), e) for e in entries)

    def _manifest_path(self, entry: os.DirEntry[str], shown: str, root: Root) -> str | None:
        if not entry.is_symlink():
            return entry.path
        try:
            real = os.path.realpath(entry.path, strict=True)
        except OSError as exc:
            self._fail(
                ManifestError(
                    f"broken symlink: {exc.strerror or exc}",
                    path=shown,
                    kind="parse",
                    load_code="unreadable",
                )
            )
            return None
        if not is_within(real, root.real):
            self._fail(
                ManifestError(
                    f"symlink to {real} escapes allowlist root {root.shown}",
                    path=shown,
                    kind="parse",
                    load_code="symlink_escapes_root",
                )
            )
            return None
        return real

    def skip_dir(self, path: str, reason: str, message: str, code: str) -> None:
        """Log a root or folder that is not walked, and keep it in the report."""
        self.log(message)
        self.report.skipped_dirs += 1
        line = PREFIX + self.report.lines[-1]
        self.report.skipped.append(Skipped("dir", "dir", path, reason, line, code=code))

    def refuse(self, err: ManifestError, prefix: str = "") -> None:
        """Log a refused file and keep it in the report (its error, path and loader line)."""
        self.report.errors.append(err)
        self.log(prefix + format_error(err))
        line = PREFIX + self.report.lines[-1]
        name = err.name or None
        self.report.skipped.append(
            Skipped(self.what, err.kind, err.path, err.message, line, name, err, load_code(err))
        )

    def warn(self, notice: Notice, path: str, name: str | None = None) -> None:
        """Log a warning about ``path`` (``warning PATH: message``) and keep it, with its code."""
        self.log(f"warning {path}: {notice.message}")
        line = PREFIX + self.report.lines[-1]
        self.report.warnings.append(
            LoaderWarning(notice.code, path, notice.message, line, name, notice.key)
        )

    def duplicate(
        self, name: str | None, path: str, reason: str, message: str, code: str = "name_taken"
    ) -> None:
        """Log a file not loaded because another one came first (a name already taken, a
        second skill file in a folder), and keep it in the report: not an error."""
        self.log(message)
        line = PREFIX + self.report.lines[-1]
        item = Skipped(self.what, "duplicate", path, reason, line, name, code=code)
        self.report.skipped.append(item)

    def _fail(self, err: ManifestError) -> None:
        self.refuse(err)


def format_error(err: ManifestError) -> str:
    """The loader line of a refused file: ``parse PATH: …`` or ``build "NAME": … (in PATH)``."""
    if err.kind == "parse":
        return f"parse {err.path}: {err.message}"
    return f'build "{err.name}": {err.message} (in {err.path})'


def load_external(
    dirs: list[str],
    skills: dict[str, Skill],
    report: LoadReport,
    sink: LogSink | None = None,
    source: str = "external",
    *,
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
    admit: Admit | None = None,
) -> int:
    """Register every valid skill.json under ``dirs`` into ``skills``; return how many.
    ``admit``: whether a file (canonical path) may load (a plugin's listed skills)."""
    walker = Walker(sink, report)
    count = 0
    for root in walker.roots(dirs):
        for shown, real in walker.files(root, lambda name: name == "skill.json"):
            if admit is not None and not admit(real):
                walker.warn(not_listed(), shown)
                continue
            try:
                raw, obj = read_manifest(real)
                folder = real.rpartition("/")[0] or "/"  # real is absolute: its folder
                loc = Location(shown, folder, root.real, root.shown)
                skill = build_skill(
                    obj, loc, source=source, default_timeout=default_timeout, raw=raw
                )
            except ManifestError as err:
                err.path = shown
                walker.refuse(err)
                continue
            if skill.name in skills:
                report.duplicates += 1
                message = f'skill "{skill.name}" already registered, skipping {shown}'
                walker.duplicate(skill.name, shown, _TAKEN.format(skill.name), message)
                continue
            skills[skill.name] = skill
            count += 1
            walker.log(f'registered subprocess skill "{skill.name}" from {shown}')
    report.registered += count
    return count


def load_personas(
    dirs: list[str],
    personas: dict[str, Persona],
    report: LoadReport,
    sink: LogSink | None = None,
) -> int:
    """Load persona files (``*.md``) under ``dirs``; the first of a name wins. A folder's
    ``README.md`` (or ``CHANGELOG.md``, any letter case) is its documentation: skipped."""
    walker = Walker(sink, report, "persona")
    count = 0
    for root in walker.roots(dirs):
        for shown, real in walker.files(root, is_persona_file):
            try:
                persona = load_persona(real)
            except ManifestError as err:
                err.path = shown
                walker.refuse(err, "persona ")
                continue
            if persona.name in personas:
                message = f'persona "{persona.name}" already registered, skipping {shown}'
                walker.duplicate(persona.name, shown, _TAKEN.format(persona.name), message)
                continue
            personas[persona.name] = persona
            count += 1
            walker.log(f'registered persona "{persona.name}" from {shown}')
    return count


def load_native(
    dirs: list[str],
    skills: dict[str, Skill],
    report: LoadReport,
    sink: LogSink | None = None,
    *,
    config: Mapping[str, str],
    source: str = "native",
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
    admit: Admit | None = None,
) -> int:
    """Register the skills of every SKILL.md under ``dirs``; first name wins, as for skill.json.

    ``skill.md`` in any letter case loads too; when one folder holds two of them, the first in
    the walk (``SKILL.md``) is the skill and the other gets a loader line saying so. Two names
    that differ as written but collide once normalised get one line naming both files.
    """
    walker = Walker(sink, report, "SKILL.md")
    count = 0
    for root in walker.roots(dirs):
        packs = PackNames(root.real, root.shown, walker.log)
        folders: dict[str, str] = {}  # folder → the skill file it holds
        for shown, real in walker.files(root, is_skill_file):
            if admit is not None and not admit(real):
                walker.warn(not_listed(), shown)
                continue
            folder = os.path.dirname(shown)
            if folder in folders:
                why = f"{folders[folder]} is the skill file of this folder"
                walker.duplicate(None, shown, why, f"skip {shown}: {why}", "second_skill_file")
                continue
            folders[folder] = shown
            try:
                doc = load_skill_md(
                    real,
                    shown=shown,
                    root=root.real,
                    shown_root=root.shown,
                    config=config,
                    source=source,
                    default_timeout=default_timeout,
                    pack=packs.pack_of(os.path.dirname(real)),
                )
            except ManifestError as err:
                err.path = shown
                walker.refuse(err)
                continue
            for notice in doc.warnings:
                walker.warn(notice, shown, doc.name)
            for skill in doc.skills:
                if skill.name in skills:
                    report.duplicates += 1
                    line = _duplicate_line(skills[skill.name], skill, shown)
                    walker.duplicate(skill.name, shown, _TAKEN.format(skill.name), line)
                    continue
                skills[skill.name] = skill
                count += 1
                what = "instructions" if skill.kind == "instructions" else "native"
                note = "" if skill.available else f" (unavailable: {skill.unavailable_reason})"
                walker.log(f'registered {what} skill "{skill.name}" from {shown}{note}')
    report.registered += count
    return count


_TAKEN = '"{}" is already registered (the first one found wins)'
#: Markdown files of a persona folder that document it and are never personas.
NOT_PERSONAS = frozenset({"readme.md", "changelog.md"})


def is_persona_file(name: str) -> bool:
    """Whether a file of a persona folder is a persona: ``*.md`` but its documentation."""
    return name.endswith(".md") and name.lower() not in NOT_PERSONAS


def _duplicate_line(kept: Skill, skipped: Skill, shown: str) -> str:
    """The line for a name already taken: when the two were written differently and only
    their normalised forms collide, it names both files, so neither is a silent first-wins."""
    if kept.declared_name and skipped.declared_name and kept.declared_name != skipped.declared_name:
        return (
            f'skill "{skipped.name}": "{skipped.declared_name}" in {shown} and '
            f'"{kept.declared_name}" in {kept.origin} collide once normalised; '
            f"keeping {kept.origin}, skipping {shown}"
        )
    return f'skill "{skipped.name}" already registered, skipping {shown}'


__all__ = [
    "LoadReport",
    "LoaderWarning",
    "Skipped",
    "Walker",
    "format_error",
    "is_persona_file",
    "load_external",
    "load_native",
    "load_personas",
]
