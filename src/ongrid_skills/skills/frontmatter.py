"""Markdown files with YAML frontmatter (personas, SKILL.md).

The first non-blank line must be ``---``; the frontmatter runs to the next ``---`` line; the rest
is the body. YAML is parsed by :mod:`ongrid_skills.skills.safe_yaml` (the safe loader behind
alias, node, depth, scalar, tag and duplicate-key limits), and the frontmatter itself is at most
:data:`MAX_FRONTMATTER_CHARS` long. Timestamps stay the text they were written as, and the
result must be plain JSON data (:func:`~ongrid_skills.skills.schemas.json_problem`), since every
door serialises it. Any failure is a ManifestError, never another exception.

Tolerant reading (SKILL.md only, as openclaw reads them): frontmatter that is not YAML but is
made of flat ``key: value`` lines — typically a ``description`` holding an unquoted ``: `` —
is read line by line, with a warning. Limits are never relaxed: YAML refused by a limit is an
error either way.

>>> meta, body, line = split_frontmatter("---\\nname: a\\n---\\nHello\\n", "x.md")
>>> meta, body, line
({'name': 'a'}, 'Hello\\n', 4)
>>> parse_frontmatter("---\\ndescription: Use when: x\\n---\\n", "x.md", tolerant=True).meta
{'description': 'Use when: x'}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import NotRegularFile, read_regular
from ongrid_skills.skills.notices import FRONTMATTER_FLAT, Notice
from ongrid_skills.skills.safe_yaml import (
    MAX_DEPTH,
    MAX_SCALAR_CHARS,
    YamlSyntaxError,
    load_mapping,
)
from ongrid_skills.skills.schemas import json_problem

MAX_FRONTMATTER_FILE_BYTES = 1024 * 1024
MAX_FRONTMATTER_CHARS = 64 * 1024
__all__ = ["Frontmatter", "key_line", "parse_frontmatter", "read_text", "split_frontmatter"]

#: One flat ``key: value`` line, as openclaw's line reader takes it (no indentation).
_FLAT_LINE_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?")


@dataclass(slots=True)
class Frontmatter:
    """A parsed frontmatter: the mapping, the body, where the body starts, reader warnings."""

    meta: dict[str, Any]
    body: str
    body_line: int
    warnings: list[Notice] = field(default_factory=list)


def read_text(path: str) -> str:
    """The text of a regular file of at most 1 MiB, UTF-8 (a BOM is dropped), or ManifestError."""
    try:
        raw = read_regular(path, MAX_FRONTMATTER_FILE_BYTES + 1)
    except NotRegularFile:
        raise ManifestError(
            "not a regular file", path=path, kind="parse", load_code="unreadable"
        ) from None
    except OSError as exc:
        raise ManifestError(
            f"cannot read: {exc.strerror or exc}", path=path, kind="parse", load_code="unreadable"
        ) from None
    if len(raw) > MAX_FRONTMATTER_FILE_BYTES:
        raise ManifestError(
            f"file is larger than {MAX_FRONTMATTER_FILE_BYTES} bytes",
            path=path,
            kind="parse",
            load_code="too_large",
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"not UTF-8: invalid byte at offset {exc.start}", path=path, kind="parse"
        ) from None


def split_frontmatter(text: str, path: str) -> tuple[dict[str, Any], str, int]:
    """(frontmatter mapping, body, line number where the body starts); strict YAML."""
    parsed = parse_frontmatter(text, path)
    return parsed.meta, parsed.body, parsed.body_line


def parse_frontmatter(text: str, path: str, *, tolerant: bool = False) -> Frontmatter:
    """The frontmatter and body of ``text``; ``tolerant`` adds the flat line reader fallback."""
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines) or lines[index].strip() != "---":
        raise ManifestError(
            "no frontmatter: the first non-blank line must be ---",
            path=path,
            kind="parse",
            line=index + 1,
        )
    opening = index
    index += 1
    start = index
    while index < len(lines) and lines[index].rstrip("\r\n").rstrip() != "---":
        index += 1
    if index >= len(lines):
        raise ManifestError(
            "frontmatter is not closed: no --- line after the opening one",
            path=path,
            kind="parse",
            line=opening + 1,
        )
    source = "".join(lines[start:index])
    if len(source) > MAX_FRONTMATTER_CHARS:
        raise ManifestError(
            f"frontmatter is {len(source)} characters, at most {MAX_FRONTMATTER_CHARS}",
            path=path,
            kind="parse",
            line=start + 1,
        )
    warnings: list[Notice] = []
    try:
        meta = load_mapping(source, path, start + 1) if source.strip() else {}
    except YamlSyntaxError as exc:
        # Only the ecosystem's one known slip: a value holding an unquoted ": ".
        slip = "mapping values are not allowed" in exc.message
        flat = _flat_lines(source, path, start + 1) if tolerant and slip else None
        if flat is None:
            raise
        meta = flat
        key = _key_at(source, exc.line - start - 1)
        warnings.append(
            Notice(
                FRONTMATTER_FLAT,
                key,
                f"frontmatter is not valid YAML ({exc.message.removeprefix('frontmatter YAML: ')}"
                f", line {exc.line}); read as flat key: value lines, as openclaw does",
            )
        )
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ManifestError(
            "frontmatter must be a YAML mapping", path=path, kind="parse", line=start + 1
        )
    problem = json_problem(meta)
    if problem is not None:
        raise ManifestError(
            f"frontmatter is not plain JSON data: {problem}",
            path=path,
            kind="parse",
            line=start + 1,
        )
    return Frontmatter(meta, "".join(lines[index + 1 :]), index + 2, warnings)


def _flat_lines(source: str, path: str, first_line: int) -> dict[str, Any] | None:
    """openclaw's reading: one ``key: value`` per line, the value is the rest of the line.

    None when a line is not of that shape (indented, a list item…): then the YAML error stands.
    """
    meta: dict[str, Any] = {}
    for offset, line in enumerate(source.splitlines()):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _FLAT_LINE_RE.fullmatch(line.rstrip())
        if match is None:
            return None
        key, value = match.group(1), (match.group(2) or "").strip()
        if key in meta:
            raise ManifestError(
                f"frontmatter: duplicate key {key!r}",
                path=path,
                kind="parse",
                line=first_line + offset,
            )
        if len(value) > MAX_SCALAR_CHARS:
            raise ManifestError(
                f"frontmatter: a value of {len(value)} characters, at most {MAX_SCALAR_CHARS}",
                path=path,
                kind="parse",
                line=first_line + offset,
            )
        meta[key] = _flat_value(value)
    return meta


def _flat_value(value: str) -> Any:
    """A quoted value unquoted; a JSON object or list (openclaw's one-line ``metadata``) parsed;
    anything else as written."""
    if not value:
        return None
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        if value[0] == "'":
            return value[1:-1].replace("''", "'")
        try:
            return str(json.loads(value))
        except ValueError:
            return value[1:-1]
    if value[0] in "{[":
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        return parsed if _depth(parsed) <= MAX_DEPTH else value
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _key_at(source: str, offset: int) -> str:
    """The key of the frontmatter line at ``offset`` (0-based), for the warning's position."""
    lines = source.splitlines()
    if 0 <= offset < len(lines):
        match = _FLAT_LINE_RE.fullmatch(lines[offset].rstrip())
        if match is not None:
            return match.group(1)
    return "frontmatter"


def key_line(text: str, key: str) -> int:
    """The line of a top-level frontmatter key (1 when not found)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    return 1
