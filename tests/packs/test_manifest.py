"""pack.json: strict parsing, every problem at once with its position, ids, versions, requires."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ongrid_skills.errors import PackError
from ongrid_skills.packs.manifest import (
    newest,
    parse_pack_json,
    requires_problem,
    running_version,
    synthesise_id,
    version_key,
)

GOOD = {"id": "ops-basics", "version": "1.2.0", "description": "Basic ops skills"}


def parse(obj: object) -> tuple[object, list[str]]:
    manifest, warnings = parse_pack_json(json.dumps(obj, indent=2).encode())
    return manifest, [w.format() for w in warnings]


def problems(raw: bytes) -> list[str]:
    with pytest.raises(PackError) as caught:
        parse_pack_json(raw)
    return [p.format() for p in caught.value.problems]


def test_a_good_manifest_parses_with_its_optional_fields() -> None:
    body = {**GOOD, "homepage": "https://example.com/ops", "requires": ">=0.1, <2"}
    manifest, warnings = parse(body)
    assert warnings == []
    assert manifest == parse_pack_json(json.dumps(body).encode())[0]
    assert manifest.to_dict() == {  # type: ignore[attr-defined]
        "id": "ops-basics",
        "version": "1.2.0",
        "description": "Basic ops skills",
        "homepage": "https://example.com/ops",
        "requires": ">=0.1, <2",
        "synthesised": False,
    }


def test_every_bad_field_is_reported_at_once_with_its_line() -> None:
    raw = b'{\n  "id": "Ops Basics",\n  "version": "1.2",\n  "description": " ",\n'
    raw += b'  "homepage": "ftp://x",\n  "requires": "at least 1"\n}\n'
    assert problems(raw) == [
        "pack.json:2:3: error: id 'Ops Basics' must match [a-z0-9_.-]+ (at most 64 characters)",
        "pack.json:3:3: error: version '1.2' is not a semantic version such as 1.0.0",
        "pack.json:4:3: error: description is required (a non-blank string)",
        "pack.json:5:3: error: homepage must be an http:// or https:// URL",
        "pack.json:6:3: error: requires 'at least 1' is not a version specifier (>=0.1,<2)",
    ]


def test_missing_fields_are_each_named() -> None:
    assert problems(b"{}") == [
        "pack.json:1:1: error: id is required (a string)",
        "pack.json:1:1: error: version is required (a string)",
        "pack.json:1:1: error: description is required (a non-blank string)",
    ]


@pytest.mark.parametrize("pack_id", [".hidden", "x.", "..", "a" * 65, "UPPER", "a/b", "a b", ""])
def test_ids_that_could_not_name_a_folder_safely_are_refused(pack_id: str) -> None:
    with pytest.raises(PackError, match="id"):
        parse({**GOOD, "id": pack_id})


@pytest.mark.parametrize("version", ["1", "1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3.4", 1])
def test_versions_must_be_semantic_versions(version: object) -> None:
    with pytest.raises(PackError, match="version"):
        parse({**GOOD, "version": version})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"id": "a", "id": "b", "version": "1.0.0", "description": "d"}', "duplicate key"),
        (b'\xef\xbb\xbf{"id": "a"}', "byte-order mark"),
        (b'{"id": "a", "version": NaN}', "invalid JSON value NaN"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"id": "\xff"}', "not UTF-8"),
        (b"", "empty file"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b" " * (1024 * 1024 + 1), "larger than"),
    ],
)
def test_hostile_bytes_are_refused_with_a_clear_message(raw: bytes, message: str) -> None:
    (problem,) = problems(raw)
    assert message in problem


def test_unknown_fields_are_warnings() -> None:
    _, warnings = parse({**GOOD, "authors": ["x"]})
    assert warnings == ["pack.json:5:3: warning: unknown field 'authors' is ignored"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_parse_or_raise_a_pack_error_nothing_else(raw: bytes) -> None:
    try:
        parse_pack_json(raw)
    except PackError as exc:
        assert exc.problems


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("My Plugin_v2 (beta)", "my-plugin-v2-beta"),
        ("obra__superpowers", "obra-superpowers"),
        ("--Ops..Tools--", "ops-tools"),
        ("Größe", "gr-e"),
        ("x" * 80, "x" * 64),
    ],
)
def test_synthesised_ids_are_lowercase_with_runs_of_other_characters_as_one_dash(
    name: str, expected: str
) -> None:
    assert synthesise_id(name) == expected


def test_a_name_with_nothing_usable_cannot_give_an_id() -> None:
    with pytest.raises(PackError, match="cannot make a pack id"):
        synthesise_id("___")


def test_versions_order_by_semver_precedence() -> None:
    versions = ["1.10.0", "1.2.0", "1.2.0-rc.1", "1.2.0-alpha", "0.9.9", "2.0.0-rc.1"]
    assert sorted(versions, key=version_key) == [
        "0.9.9",
        "1.2.0-alpha",
        "1.2.0-rc.1",
        "1.2.0",
        "1.10.0",
        "2.0.0-rc.1",
    ]
    assert newest([*versions, "garbage"]) == "2.0.0-rc.1"
    assert newest(["garbage"]) is None


def test_requires_is_checked_against_the_running_version() -> None:
    assert running_version()  # the installed distribution has one
    assert requires_problem(None) is None
    assert requires_problem(">=0.1,<2", "0.1.0") is None
    assert requires_problem(">=2", "0.1.0") == (
        "the pack requires ongrid-skills >=2; this is 0.1.0"
    )
    assert requires_problem(f"=={running_version()}") is None
