"""Regressions: each crash the parser properties (test_parsers_properties.py) found, pinned.

Every case used to escape as another exception than ManifestError (TypeError, ValueError,
KeyError, IndexError from PyYAML) or to load what no door could serialise afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.persona import load_persona
from ongrid_skills.skills.skill_json import build_skill, parse_manifest
from ongrid_skills.skills.skill_md import load_skill_md
from tests.skills.test_parsers_properties import folder, location, plain_json, write

__all__ = ["folder"]  # the module-scoped skill folder fixture, shared with the properties


def load_md(folder: Path, front: str) -> Any:
    path = write(folder / "SKILL.md", f"---\n{front}\n---\nbody\n")
    return load_skill_md(path, shown=path, root=str(folder), shown_root="root", config={})


def test_a_schema_dialect_that_is_not_a_string_is_a_manifest_error(folder: Path) -> None:
    # Was TypeError: unhashable type: 'list' (the dialect was looked up in a set).
    obj = {"name": "ok", "description": "d", "entry": "run", "schema": {"$schema": []}}
    with pytest.raises(ManifestError, match=r"schema \$schema must be"):
        build_skill(obj, location(folder))


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "ok", "description": "x \\ud800 y", "entry": "run"}',
        b'{"name": "ok", "description": "d", "entry": "run", "schema": {"maximum": 1e400}}',
        b'{"name": "ok", "description": "d", "entry": "run", "x": {"\\udc00": 1}}',
    ],
)
def test_json_that_no_door_could_send_on_is_a_parse_error(raw: bytes) -> None:
    # Was loaded: a lone surrogate made every skill listing a 500 (UTF-8 encoding of the body).
    with pytest.raises(ManifestError, match="not plain JSON data") as caught:
        parse_manifest(raw, "skill.json")
    assert caught.value.kind == "parse"
    caught.value.message.encode("utf-8")


def test_a_schema_nested_hundreds_of_levels_deep_is_refused_at_load(folder: Path) -> None:
    # Was loaded: executing the skill then raised "Recursion limit reached" in the validator
    # and listing tools overflowed pydantic's serialiser (both 500s).
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(400):
        node["not"] = {}
        node = node["not"]
    raw = json.dumps({"name": "ok", "description": "d", "entry": "run", "schema": schema})
    with pytest.raises(ManifestError, match="nested deeper than 100 levels"):
        parse_manifest(raw.encode(), "skill.json")
    with pytest.raises(ManifestError, match="nested deeper than 100 levels"):
        build_skill(
            {"name": "ok", "description": "d", "entry": "run", "schema": schema}, location(folder)
        )


@pytest.mark.parametrize("stamp", ["2024-01-01", "2001-13-45", "2001-01-01t00:00:00+99:00"])
def test_a_yaml_timestamp_is_kept_as_the_text_written(folder: Path, stamp: str) -> None:
    # Was ValueError ("month must be in 1..12") for an impossible date, and a date object, which
    # JSON cannot carry, for a possible one (a 500 when the skill was listed).
    doc = load_md(folder, f"name: ok\ndescription: d\nversion: {stamp}")
    assert doc.skills[0].extra == {"version": stamp}


def test_a_date_in_a_tool_schema_is_text_and_the_skill_serialises(folder: Path) -> None:
    front = (
        "name: ok\ndescription: d\ntools: [{name: t, impl: 'builtin:net.probe_tcp', "
        "schema: {type: object, properties: {h: {type: string, default: 2001-01-01}}}}]"
    )
    (skill,) = load_md(folder, front).skills
    assert skill.schema["properties"]["h"]["default"] == "2001-01-01"
    plain_json(skill.summary())


@pytest.mark.parametrize(
    "value",
    ["!!float x", "!!int x", "!!bool maybe", "!!float ''"],
)
def test_a_tagged_value_its_tag_cannot_read_is_a_yaml_error_with_its_line(
    folder: Path, value: str
) -> None:
    # Was ValueError, KeyError or IndexError from PyYAML's constructors.
    with pytest.raises(ManifestError, match="frontmatter YAML: cannot read") as caught:
        load_md(folder, f"name: ok\ndescription: d\nodd: {value}")
    assert caught.value.line == 4  # the fence is line 1, "odd:" is line 4


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (
            "!!binary /w==",
            "frontmatter YAML: could not determine a constructor for the tag !!binary",
        ),
        ("!!set {a, b}", "frontmatter YAML: could not determine a constructor for the tag !!set"),
        (
            "!!omap [{a: 1}]",
            "frontmatter YAML: could not determine a constructor for the tag !!omap",
        ),
        ("{1: one}", "frontmatter is not plain JSON data: a key that is not a string (1) at /blob"),
    ],
)
def test_a_persona_holding_what_json_cannot_carry_is_a_manifest_error(
    folder: Path, value: str, what: str
) -> None:
    # Was loaded: GET /v1/personas then failed to serialise the persona's extra keys (a 500).
    path = write(
        folder / "persona.md", f"---\nname: p\ndescription: d\nwhen_to_use: w\nblob: {value}\n---\n"
    )
    with pytest.raises(ManifestError) as caught:
        load_persona(path)
    assert caught.value.message.startswith(what), caught.value.message


def test_a_persona_holding_a_non_finite_number_keeps_it_as_text(folder: Path) -> None:
    # Was loaded as float('nan'): GET /v1/personas then failed to serialise it (a 500).
    path = write(
        folder / "persona.md", "---\nname: p\ndescription: d\nwhen_to_use: w\nblob: .nan\n---\n"
    )
    persona = load_persona(path)
    assert persona.extra["blob"] == "nan"
    json.dumps(persona.summary(), allow_nan=False)


def test_a_yaml_alias_bomb_is_refused_without_expanding_it(folder: Path) -> None:
    lines = [
        "name: p",
        "description: d",
        "when_to_use: w",
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]",
    ]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = write(folder / "persona.md", "---\n" + "\n".join(lines) + "\n---\n")
    with pytest.raises(ManifestError, match=r"expands to \d+ nodes \(aliases followed\), at most"):
        load_persona(path)


def test_an_exec_impl_with_a_nul_byte_is_a_manifest_error(folder: Path) -> None:
    # Was ValueError ("embedded null byte") from resolving the path.
    with pytest.raises(ManifestError, match="is not a valid path"):
        load_md(folder, 'name: ok\ndescription: d\ntools: [{name: t, impl: "exec:a\\0b"}]')
