"""Property tests of the skill-file parsers: whatever bytes, JSON or YAML-ish text a file holds,
``skill.json`` (read_manifest / build_skill), the frontmatter, ``SKILL.md`` (load_skill_md) and
persona files (load_persona) either load or raise a ManifestError, never anything else; and what
loads is plain JSON data that every door can serialise (strict JSON, valid UTF-8).

Deterministic (``derandomize``) and bounded; the crashes found on the way have regression tests
of their own in test_parser_crashes.py.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.frontmatter import split_frontmatter
from ongrid_skills.skills.persona import load_persona
from ongrid_skills.skills.schemas import DRAFT_2020_12
from ongrid_skills.skills.skill_json import Location, build_skill, parse_manifest, read_manifest
from ongrid_skills.skills.skill_md import load_skill_md

T = TypeVar("T")

PROPERTIES = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# ---- strategies -------------------------------------------------------------------------------
#: Any code point, lone UTF-16 surrogates included: JSON can spell them (``"\ud800"``).
ANY_CHAR = st.characters(codec=None, exclude_categories=())
ANY_TEXT = st.text(ANY_CHAR, max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | ANY_TEXT
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)
SCHEMA_KEYWORDS = (
    "type",
    "properties",
    "required",
    "items",
    "$ref",
    "$schema",
    "$id",
    "pattern",
    "patternProperties",
    "enum",
    "const",
    "default",
    "minimum",
    "maxLength",
    "additionalProperties",
    "allOf",
    "not",
)
SCHEMAS = st.recursive(
    st.just({"type": "object"}) | JSON_VALUES,
    lambda inner: st.dictionaries(
        st.sampled_from(SCHEMA_KEYWORDS) | ANY_TEXT,
        inner | st.sampled_from(["object", "string", "#/x", "[", "^a+$", DRAFT_2020_12]),
        max_size=4,
    ),
    max_leaves=10,
)
ENTRIES = (
    st.sampled_from(
        [
            "run",
            "./run",
            "data.txt",
            "sub",
            "sub/run",
            "../run",
            "/bin/sh",
            "",
            " ",
            ".",
            "..",
            "a\x00b",
        ]
    )
    | ANY_TEXT
)


def mostly(good: Any, other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` three times in four, else ``other``: most examples get past the first check."""
    return st.one_of(st.just(good), st.just(good), st.just(good), other)


MANIFESTS = st.fixed_dictionaries(
    {
        "name": mostly("ok", st.sampled_from(["a_b_1", "Bad-Name", "x" * 65, ""]) | JSON_VALUES),
        "description": mostly("does things", JSON_VALUES),
        "entry": mostly("run", ENTRIES | JSON_VALUES),
    },
    optional={
        "schema": SCHEMAS,
        "env_allow": st.lists(st.sampled_from(["HOME", "1BAD", "A_B"]) | ANY_TEXT) | JSON_VALUES,
        "timeout_seconds": st.integers(-5, 100_000) | JSON_VALUES,
        "class": st.sampled_from(["safe", "mutating", "dangerous", "SAFE"]) | JSON_VALUES,
        "category": st.just("ops") | JSON_VALUES,
        "extra_field": JSON_VALUES,
    },
)

#: Pieces of YAML that construct something other than plain JSON data, or trip a constructor.
YAML_TOKENS = (
    "2001-13-45",
    "2001-01-01",
    "2001-12-14t21:59:43.10-05:00",
    "2001-01-01t00:00:00+99:00",
    "!!binary /w==",
    "!!binary aGVsbG8=",
    "!!binary ###",
    "!!set {a, b}",
    "!!omap [{a: 1}]",
    "!!pairs [{a: 1}]",
    "!!python/object:os.system ls",
    "!!timestamp x",
    "!!int x",
    "!!float 1e99999",
    ".nan",
    ".inf",
    "-.inf",
    "1e400",
    "0x_",
    "0b101",
    "0o17",
    "1:20:30",
    "~",
    "null",
    "yes",
    "on",
    "&a [1, 2]",
    "*a",
    "*nowhere",
    "[[[[[]]]]]",
    "{a: {b: {c: [1]}}}",
    '"\\0"',
    '"\\ud800"',
    '"\\x85"',
    "|\n  block\n",
    ">-\n  folded\n",
    "? [complex, key]\n: value",
    "- item",
    "'quoted ''string'''",
    "\t",
    "%YAML 1.1",
    "---",
    "...",
)
SKILL_MD_KEYS = ("name", "description", "tools", "metadata", "activation", "when_to_use", "version")
TOOL_VALUES = (
    "[{name: t, impl: 'exec:run'}]",
    "[{name: t, impl: 'exec:../escape/run'}]",
    "[{name: t, impl: 'exec:data.txt'}]",
    '[{name: t, impl: "exec:a\\0b"}]',
    "[{name: t, impl: 'builtin:net.probe_tcp', schema: {type: object, default: 2001-01-01}}]",
    "[{name: t, impl: 'builtin:net.probe_tcp', schema: {$schema: [1]}}]",
    "[{name: t, impl: 'builtin:net.probe_tcp', class: [1], timeout_seconds: .inf}]",
    "[{name: t, impl: 'builtin:nope'}]",
    "[{name: t, impl: 'weird:x'}]",
    "[{name: t, impl: 'builtin:net.probe_tcp', env_allow: [1]}]",
    "[{name: T}]",
    "[7]",
    "{}",
)
PERSONA_KEYS = (
    "name",
    "description",
    "when_to_use",
    "permission_mode",
    "tools",
    "disallowed_tools",
    "max_turns",
    "model",
    "critical_reminder",
    "team",
)
YAML_WORDS = st.sampled_from(YAML_TOKENS) | st.text(
    st.characters(categories=["L", "N", "P", "S", "Zs"]), max_size=10
)


def yamlish(
    required: dict[str, str], keys: tuple[str, ...], values: st.SearchStrategy[str]
) -> st.SearchStrategy[str]:
    """Frontmatter-ish text: the required keys (mostly well-formed), then random lines of
    ``key: value`` (some indented or list items), keys known or not, values tricky or not."""
    line = st.tuples(
        mostly("", st.sampled_from(["  ", "- "])),
        st.sampled_from(keys) | YAML_WORDS,
        mostly(": ", st.sampled_from([":", " "])),
        values,
    ).map("".join)
    firsts = [mostly(f"{key}: {value}", line) for key, value in required.items()]
    lines = st.tuples(*firsts, st.lists(line, max_size=3)).map(
        lambda parts: "\n".join([*parts[:-1], *parts[-1]])
    )
    # The same keys with arbitrary plain values, written by a YAML emitter: always YAML, so the
    # examples reach the builders with values of every type.
    plain = st.characters(codec="utf-8")
    values_of_any_type = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(plain, max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(plain), inner),
        max_leaves=8,
    )
    emitted = st.fixed_dictionaries(
        {key: mostly(value, values_of_any_type) for key, value in required.items()},
        optional={key: values_of_any_type for key in keys if key not in required},
    ).map(lambda meta: yaml.safe_dump(meta, allow_unicode=True).rstrip("\n"))
    return lines | emitted


SKILL_MD_TEXT = yamlish(
    {"name": "ok", "description": "does things"},
    SKILL_MD_KEYS,
    st.sampled_from(TOOL_VALUES) | YAML_WORDS,
)
PERSONA_TEXT = yamlish(
    {"name": "p", "description": "d", "when_to_use": "w"},
    PERSONA_KEYS,
    st.sampled_from(["read-only", "mutating-with-confirm", "[a_*, '*b']", "['a*b']", "5"])
    | YAML_WORDS,
)


def framed(front: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """The frontmatter between fences (mostly well-formed ones), then a body."""
    return st.tuples(
        mostly("---\n", st.sampled_from(["\n---\n", "---\r\n", "--- \n", "\ufeff---\n", "x\n"])),
        front,
        mostly("\n---\n", st.sampled_from(["\n---", "\n--- \n", "\n", "\n...\n"])),
        st.text(max_size=20),
    ).map("".join)


# ---- helpers ----------------------------------------------------------------------------------
def typed(call: Callable[[], T]) -> T | None:
    """The call's value, or None when it raised a ManifestError whose message can be printed."""
    try:
        value = call()
        event("loaded")
        return value
    except ManifestError as exc:
        event(f"ManifestError: {exc.message[:40]}")
        assert isinstance(exc.message, str) and exc.message
        exc.message.encode("utf-8")  # log lines, the CLI and REST print it
        return None


def plain_json(value: Any) -> None:
    """``value`` serialises as strict JSON and valid UTF-8, as every door needs."""
    json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    """A skill folder shared by the examples: an executable ``run``, a plain file, a subdir."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(os.path.realpath(tmp))
        (base / "sub").mkdir()
        for path in (base / "run", base / "sub" / "run"):
            path.write_text("#!/bin/sh\necho '{}'\n")
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        (base / "data.txt").write_text("data\n")
        yield base


def location(folder: Path) -> Location:
    return Location(
        path=str(folder / "skill.json"), folder=str(folder), root=str(folder), shown_root="root"
    )


def write(path: Path, data: bytes | str) -> str:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return str(path)


def check_manifest_object(obj: dict[str, Any], folder: Path) -> None:
    """The loader's path: the object as JSON text, parsed, then built."""
    parsed = typed(lambda: parse_manifest(json.dumps(obj).encode(), "skill.json"))
    if parsed is None:
        return
    skill = typed(lambda: build_skill(parsed, location(folder)))
    if skill is not None:
        plain_json(skill.summary())


# ---- skill.json -------------------------------------------------------------------------------
@PROPERTIES
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_parse_to_an_object_or_a_manifest_error(raw: bytes) -> None:
    obj = typed(lambda: parse_manifest(raw, "skill.json"))
    if obj is not None:
        assert isinstance(obj, dict)
        plain_json(obj)


@PROPERTIES
@given(value=JSON_VALUES)
def test_arbitrary_json_text_parses_to_plain_data_or_a_manifest_error(value: Any) -> None:
    raw = json.dumps(value).encode()  # NaN/Infinity/1e400 and "\ud800" spelled as Python does
    obj = typed(lambda: parse_manifest(raw, "skill.json"))
    if obj is not None:
        plain_json(obj)


@PROPERTIES
@given(obj=MANIFESTS)
def test_a_manifest_of_arbitrary_fields_builds_or_raises_a_manifest_error(
    obj: dict[str, Any], folder: Path
) -> None:
    check_manifest_object(obj, folder)


@PROPERTIES
@given(obj=MANIFESTS)
def test_a_manifest_file_reads_and_builds_or_raises_a_manifest_error(
    obj: dict[str, Any], folder: Path
) -> None:
    path = write(folder / "skill.json", json.dumps(obj))
    parsed = typed(lambda: read_manifest(path))
    if parsed is not None:
        skill = typed(lambda: build_skill(parsed[1], location(folder)))
        if skill is not None:
            plain_json(skill.summary())


# ---- frontmatter, SKILL.md, personas ----------------------------------------------------------
@PROPERTIES
@given(text=st.text(ANY_CHAR, max_size=120) | framed(SKILL_MD_TEXT | PERSONA_TEXT))
def test_arbitrary_text_splits_into_plain_data_or_a_manifest_error(text: str) -> None:
    split = typed(lambda: split_frontmatter(text, "x.md"))
    if split is not None:
        meta, body, line = split
        assert isinstance(meta, dict) and isinstance(body, str) and line >= 1
        plain_json(meta)


@PROPERTIES
@given(data=st.binary(max_size=120) | framed(SKILL_MD_TEXT))
def test_a_skill_md_of_arbitrary_content_loads_or_raises_a_manifest_error(
    data: bytes | str, folder: Path
) -> None:
    path = write(folder / "SKILL.md", data)

    def load() -> Any:
        return load_skill_md(
            path, shown=path, root=str(folder), shown_root="root", config={"k": "v"}
        )

    doc = typed(load)
    if doc is not None:
        for skill in doc.skills:
            plain_json({**skill.summary(), "extra": skill.extra})


@PROPERTIES
@given(data=st.binary(max_size=120) | framed(PERSONA_TEXT))
def test_a_persona_of_arbitrary_content_loads_or_raises_a_manifest_error(
    data: bytes | str, folder: Path
) -> None:
    path = write(folder / "persona.md", data)
    persona = typed(lambda: load_persona(path))
    if persona is not None:
        plain_json({**persona.summary(), "prompt": persona.prompt})
        assert 1 <= persona.max_turns <= 1000


def test_the_strategies_reach_both_outcomes(folder: Path) -> None:
    """Guard against strategies that only ever produce errors: a valid file of each kind loads."""
    good = {"name": "ok", "description": "d", "entry": "run"}
    assert build_skill(good, location(folder)).name == "ok"
    md = write(folder / "SKILL.md", "---\nname: ok\ndescription: d\n---\nbody\n")
    assert load_skill_md(md, shown=md, root=str(folder), shown_root="r", config={}).skills
    persona = write(folder / "persona.md", "---\nname: p\ndescription: d\nwhen_to_use: w\n---\n")
    assert load_persona(persona).name == "p"
