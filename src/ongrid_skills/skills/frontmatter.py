"""Markdown files with YAML frontmatter (personas, SKILL.md).

The first non-blank line must be ``---``; the frontmatter runs to the next ``---`` line; the rest
is the body. YAML is parsed with the safe loader, timestamps kept as the text they were written
as; the result must be plain JSON data (see :func:`~ongrid_skills.skills.schemas.json_problem`),
since every door serialises it (and a file from an operator's folder must never build
Python objects). Any failure is a ManifestError, never another exception.

>>> meta, body, line = split_frontmatter("---\\nname: a\\n---\\nHello\\n", "x.md")
>>> meta, body, line
({'name': 'a'}, 'Hello\\n', 4)
"""

from __future__ import annotations

from typing import Any

import yaml

from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import NotRegularFile, read_regular
from ongrid_skills.skills.schemas import json_problem

MAX_FRONTMATTER_FILE_BYTES = 1024 * 1024
#: The safe loader, in C when PyYAML was built with libyaml (≈10× faster, same safety).
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FrontmatterLoader(SAFE_LOADER):  # type: ignore[misc]
    """The safe loader; timestamps stay text, and a value its tag cannot read is a YAML error.

    PyYAML's constructors raise ValueError, IndexError, KeyError or AttributeError on text their
    tag cannot read (``2001-13-45``, ``!!float x``, ``!!bool maybe``, ``!!timestamp x``).
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, LookupError, AttributeError, TypeError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {node.tag} value {node.value!r}: {exc}", node.start_mark
            ) from None


def _timestamp_as_text(loader: yaml.constructor.SafeConstructor, node: yaml.Node) -> Any:
    # A date is not JSON: kept as written (``version: 2024-01-01`` → "2024-01-01").
    return loader.construct_scalar(node)  # type: ignore[arg-type]


FrontmatterLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def read_text(path: str) -> str:
    """The text of a regular file of at most 1 MiB, UTF-8 (a BOM is dropped), or ManifestError."""
    try:
        raw = read_regular(path, MAX_FRONTMATTER_FILE_BYTES + 1)
    except NotRegularFile:
        raise ManifestError("not a regular file", path=path, kind="parse") from None
    except OSError as exc:
        raise ManifestError(
            f"cannot read: {exc.strerror or exc}", path=path, kind="parse"
        ) from None
    if len(raw) > MAX_FRONTMATTER_FILE_BYTES:
        raise ManifestError(
            f"file is larger than {MAX_FRONTMATTER_FILE_BYTES} bytes", path=path, kind="parse"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"not UTF-8: invalid byte at offset {exc.start}", path=path, kind="parse"
        ) from None


def split_frontmatter(text: str, path: str) -> tuple[dict[str, Any], str, int]:
    """(frontmatter mapping, body, line number where the body starts)."""
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
    try:
        meta = yaml.load(source, Loader=FrontmatterLoader) if source.strip() else {}  # noqa: S506
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = start + 1 + (mark.line if mark is not None else 0)
        column = (mark.column + 1) if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(
            f"frontmatter YAML: {problem}", path=path, kind="parse", line=line, column=column
        ) from None
    except RecursionError:  # the pure-Python loader composes nested nodes recursively
        raise ManifestError(
            "frontmatter YAML: nested too deeply", path=path, kind="parse", line=start + 1
        ) from None
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
    return meta, "".join(lines[index + 1 :]), index + 2


def key_line(text: str, key: str) -> int:
    """The line of a top-level frontmatter key (1 when not found)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    return 1
