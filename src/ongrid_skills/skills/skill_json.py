"""``skill.json``: parsing (bytes → object) and building (object → Skill), SPEC §2.

Parsing fails for a file that cannot be read, is over 1 MiB, is not UTF-8 JSON, names a key twice
in one object or is not a JSON object (``kind='parse'``, with line and column). Building fails for
a well-formed object with a bad or missing field (``kind='build'``, with the offending field's
position for ``validate``).
Unknown fields are ignored by the loader and reported as warnings by :func:`unknown_fields`.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

from ongrid_skills import strict_json
from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import (
    ENV_NAME_RE,
    Fingerprint,
    NotRegularFile,
    check_entry,
    fingerprint,
    read_regular,
)
from ongrid_skills.skills.credential_slots import SlotError, parse_slots
from ongrid_skills.skills.model import SCOPE_MANAGER, Skill, SpawnTarget, parse_scope, scope_problem
from ongrid_skills.skills.preview_spec import PreviewProblem, parse_preview
from ongrid_skills.skills.sandbox import SandboxProblem, parse_sandbox
from ongrid_skills.skills.schemas import (
    EMPTY_OBJECT_SCHEMA,
    MAX_DOCUMENT_DEPTH,
    json_problem,
    json_type,
    may_need_compiling,
    schema_problem,
)
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, SkillClass

MAX_MANIFEST_BYTES = 1024 * 1024
_CLASSES = {member.value: member for member in SkillClass}
NAME_RE = re.compile(r"[a-z0-9_]+")
MAX_NAME_LENGTH = 64
KNOWN_FIELDS = (
    "name",
    "description",
    "schema",
    "entry",
    "env_allow",
    "timeout_seconds",
    "class",
    "category",
    "scope",
    "credentials",
    "sandbox",
    "preview",
)


def read_manifest(path: str) -> tuple[bytes, dict[str, Any]]:
    """Read and parse one manifest; raise a parse ManifestError on any failure."""
    try:
        # A FIFO named skill.json must not block start-up: only regular files are read.
        raw = read_regular(path, MAX_MANIFEST_BYTES + 1)
    except NotRegularFile:
        raise ManifestError(
            "not a regular file", path=path, kind="parse", load_code="unreadable"
        ) from None
    except OSError as exc:
        raise ManifestError(
            f"cannot read: {exc.strerror or exc}", path=path, kind="parse", load_code="unreadable"
        ) from None
    return raw, parse_manifest(raw, path)


def parse_manifest(raw: bytes, path: str) -> dict[str, Any]:
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"file is larger than {MAX_MANIFEST_BYTES} bytes",
            path=path,
            kind="parse",
            load_code="too_large",
        )
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ManifestError(
            "starts with a UTF-8 byte-order mark; save it as plain UTF-8",
            path=path,
            kind="parse",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8")  # valid up to the bad byte
        line, col = _position(before, len(before))
        raise ManifestError(
            f"not UTF-8: invalid byte 0x{raw[exc.start]:02x} at line {line} column {col}",
            path=path,
            kind="parse",
            line=line,
            column=col,
        ) from None
    if not text.strip():
        raise ManifestError("empty file: expected a JSON object", path=path, kind="parse")
    plain = _plain_text(text)
    try:
        try:
            obj = strict_json.decode(text, _DECODER)
        except _Overflow:  # rare: parse again as Python would, for json_problem to locate it
            obj = strict_json.decode(text, _LENIENT)
            plain = False
    except strict_json.DuplicateKey as exc:
        line, col = exc.line or 1, exc.column or 1
        raise ManifestError(
            f"duplicate key {json.dumps(exc.key)} ({exc.path or '$'}) at line {line} column {col}",
            path=path,
            kind="parse",
            line=line,
            column=col,
        ) from None
    except _NonStandardConstant as exc:
        line, col = _constant_position(text)
        raise ManifestError(
            f"invalid JSON value {exc.args[0]} at line {line} column {col}",
            path=path,
            kind="parse",
            line=line,
            column=col,
        ) from None
    except json.JSONDecodeError as exc:
        raise ManifestError(
            # Some messages end in "at" ("Invalid control character at"): avoid "at at".
            f"{exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}",
            path=path,
            kind="parse",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except RecursionError:
        raise ManifestError("JSON nested too deeply", path=path, kind="parse") from None
    if not isinstance(obj, dict):
        raise ManifestError(
            f"expected a JSON object at the top level, got {json_type(obj)}",
            path=path,
            kind="parse",
        )
    # Python's parser takes "\ud800" and 1e400, which no door can send on; and a document nested
    # a few hundred levels deep, which the validator and the serialisers cannot handle. The walk
    # that finds them is skipped for a text that cannot hold any (nearly every manifest).
    problem = None if plain else json_problem(obj)
    if problem is not None:
        raise ManifestError(f"not plain JSON data: {problem}", path=path, kind="parse")
    return obj


_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")


def _plain_text(text: str) -> bool:
    """Whether JSON that ``_DECODER`` parsed from ``text`` is plain JSON data (see
    :func:`json_problem`) without walking it: no escape of a UTF-16 surrogate, and too few
    brackets to be nested past the limit (a number that overflows never gets this far: see
    ``_finite``). False only means: walk it."""
    if text.count("{") + text.count("[") > MAX_DOCUMENT_DEPTH:
        return False
    return "\\u" not in text or _SURROGATE_ESCAPE_RE.search(text) is None


class _NonStandardConstant(ValueError):
    """NaN, Infinity and -Infinity: accepted by Python's json module, but not JSON."""


def _reject_constant(name: str) -> Any:
    raise _NonStandardConstant(name)


class _Overflow(ValueError):
    """A number too large for a float (1e400): parsed again by ``_LENIENT`` to be located."""


def _finite(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _Overflow(literal)
    return value


# A key given twice is refused (json keeps the last one): "class": "safe" then "class":
# "dangerous" must not leave a reader of the first in doubt about what was loaded.
_DECODER = strict_json.decoder(parse_constant=_reject_constant, parse_float=_finite)
_LENIENT = strict_json.decoder(parse_constant=_reject_constant)


_STRING_OR_CONSTANT_RE = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)', re.DOTALL)


def _constant_position(text: str) -> tuple[int, int]:
    """Line and column of the first NaN/Infinity outside a string (1, 1 if not found)."""
    for match in _STRING_OR_CONSTANT_RE.finditer(text):
        if match.group(1):
            return _position(text, match.start(1))
    return 1, 1


@dataclass(frozen=True, slots=True)
class Location:
    """Where a manifest sits: its path as shown, its canonical folder, and its root."""

    path: str  # manifest path as shown in log lines (absolute)
    folder: str  # canonical folder holding the manifest
    root: str  # canonical allow-list root
    shown_root: str  # the root as the operator wrote it


def build_skill(
    obj: dict[str, Any],
    loc: Location,
    *,
    source: str = "external",
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
    raw: bytes | None = None,
) -> Skill:
    """Turn a parsed manifest into a Skill; raise a build ManifestError naming the field.

    ``raw``: the manifest ``obj`` was parsed from by :func:`parse_manifest`, which checked that
    it is plain JSON data; its schema is then not walked again, and is compiled at load time
    only if the text names a keyword the meta-schema cannot check (see ``schema_problem``)."""
    raw_name = obj.get("name")
    name = raw_name if isinstance(raw_name, str) else ""

    def fail(message: str, field: str | None) -> ManifestError:
        return ManifestError(message, path=loc.path, kind="build", name=name, field=field)

    if "name" not in obj:
        raise fail("name is required", "name")
    if not isinstance(raw_name, str):
        raise fail(f"name must be a string, got {json_type(raw_name)}", "name")
    if not NAME_RE.fullmatch(name):
        raise fail(f"name {name!r} must match [a-z0-9_]+".replace("'", '"'), "name")
    if len(name) > MAX_NAME_LENGTH:
        raise fail(f"name is {len(name)} characters, at most {MAX_NAME_LENGTH}", "name")

    description = obj.get("description")
    if not isinstance(description, str) or not description.strip():
        what = "is required" if description is None else "must be a non-blank string"
        raise fail(f"description {what}", "description")

    # A fresh default per skill: never share one mutable dict between skills.
    schema = obj["schema"] if "schema" in obj else copy.deepcopy(EMPTY_OBJECT_SCHEMA)
    if raw is None:
        problem = schema_problem(schema)
    else:
        problem = schema_problem(schema, plain=True, compile=may_need_compiling(raw))
    if problem is not None:
        raise fail(problem, "schema")

    entry = obj.get("entry")
    if not isinstance(entry, str) or not entry.strip():
        what = "is required" if entry is None else "must be a non-empty string"
        raise fail(f"entry {what}", "entry")
    if "\x00" in entry:
        raise fail("entry contains a NUL byte", "entry")

    env_allow = obj.get("env_allow", [])
    if env_allow is None:
        env_allow = []
    if not isinstance(env_allow, list):
        raise fail(f"env_allow must be an array of names, got {json_type(env_allow)}", "env_allow")
    for item in env_allow:
        if not isinstance(item, str) or not ENV_NAME_RE.fullmatch(item):
            raise fail(
                f"env_allow entry {json.dumps(item)} must match [A-Za-z_][A-Za-z0-9_]*",
                "env_allow",
            )

    timeout = obj.get("timeout_seconds", 0)
    if timeout is None:
        timeout = 0
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise fail(
            f"timeout_seconds must be an integer, got {json.dumps(timeout)}", "timeout_seconds"
        )
    if timeout < 0 or timeout > MAX_TIMEOUT_SECONDS:
        raise fail(
            f"timeout_seconds must be between 0 and {MAX_TIMEOUT_SECONDS}", "timeout_seconds"
        )

    raw_class = obj.get("class", "safe")
    skill_class = _CLASSES.get(raw_class) if isinstance(raw_class, str) else None
    if skill_class is None:
        raise fail(
            f"class must be one of safe, mutating, dangerous, got {json.dumps(raw_class)}",
            "class",
        )

    category = obj.get("category", "external")
    if not isinstance(category, str) or not category.strip():
        raise fail("category must be a non-blank string", "category")

    raw_scope = obj.get("scope", SCOPE_MANAGER)
    scope = parse_scope(raw_scope)
    if scope is None:
        raise fail(f"scope must be manager or host, got {json.dumps(raw_scope)}", "scope")
    problem = scope_problem(scope, schema, "subprocess")
    if problem is not None:
        raise fail(problem, "scope")

    try:
        credentials = parse_slots(obj.get("credentials"), tuple(env_allow))
    except SlotError as exc:
        raise fail(str(exc), "credentials") from None

    try:
        sandbox = parse_sandbox(obj.get("sandbox"))
    except SandboxProblem as exc:
        raise fail(f"sandbox {exc}", "sandbox") from None

    target, print_ = _resolve_entry(entry, loc, fail)
    spawn = SpawnTarget(
        entry=target,
        root=loc.root,
        folder=loc.folder,
        env_allow=tuple(dict.fromkeys(env_allow)),
        shown_root=loc.shown_root,
        fingerprint=print_,
    )
    try:
        preview = parse_preview(
            obj.get("preview"), main=spawn, skill_timeout=timeout or default_timeout
        )
    except PreviewProblem as exc:
        raise fail(str(exc), "preview") from None
    return Skill(
        name=name,
        description=description.strip(),
        skill_class=skill_class,
        category=category.strip(),
        kind="subprocess",
        source=source,
        schema=schema,
        timeout_seconds=timeout or default_timeout,
        origin=loc.path,
        scope=scope,
        credentials=credentials,
        sandbox=sandbox,
        target=spawn,
        preview=preview,
    )


def _resolve_entry(entry: str, loc: Location, fail: Any) -> tuple[str, Fingerprint | None]:
    """The canonical entry path and its fingerprint, or a build error in the loader's words."""
    if not os.path.isabs(entry) and "/" not in entry and entry not in (".", ".."):
        # Fast path: the folder is canonical (the walk never follows links), so a plain file
        # directly inside it needs only an lstat, no realpath.
        path = os.path.join(loc.folder, entry)
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            if st.st_mode & 0o111 and os.access(path, os.X_OK):
                return path, fingerprint(st)
            raise fail(f"entry {path} is not executable", "entry")
    joined = os.path.normpath(entry if os.path.isabs(entry) else os.path.join(loc.folder, entry))
    check = check_entry(joined, loc.root, loc.shown_root)
    if check.problem is not None:
        raise fail(check.problem, "entry")
    return check.path, check.fingerprint


def unknown_fields(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, warning message) for every field the loader ignores, with a typo hint."""
    out = []
    for key in obj:
        if key in KNOWN_FIELDS:
            continue
        guess = get_close_matches(key, KNOWN_FIELDS, n=1, cutoff=0.6)
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        out.append((key, f"unknown field {key!r} is ignored{hint}"))
    return out


_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_COLON_RE = re.compile(r"\s*:")


def key_position(text: str, key: str) -> tuple[int, int]:
    """Line and column of the top-level ``"key":`` in a manifest's text (1, 1 when absent).

    Only keys of the top-level object count: a schema property of the same name (``name``,
    ``description``, ``timeout_seconds``...) earlier in the file must not take the position.
    """
    depth = 0
    for match in _TOKEN_RE.finditer(text):
        lexeme = match.group()
        if lexeme[0] != '"':
            depth += 1 if lexeme in "{[" else -1
        elif depth == 1 and _COLON_RE.match(text, match.end()):
            unquoted = lexeme[1:-1] if "\\" not in lexeme else json.loads(lexeme)
            if unquoted == key:
                return _position(text, match.start())
    return 1, 1


def _position(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    line = before.count("\n") + 1
    col = offset - (before.rfind("\n") + 1) + 1
    return line, col
