"""Args from the command line: KEY=VALUE pairs typed from the schema, KEY:=JSON, one JSON object
or '-' — the words alone, then a local ``run`` with them (the registry's schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ongrid_skills.doors.cli.args import from_pairs, parse_json, split
from ongrid_skills.doors.cli.main import cli
from ongrid_skills.errors import InvalidRequest
from tests.support.skills import write_skill

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "dry_run": {"type": "boolean"},
        "keep": {"type": "integer"},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "items": {"type": "integer"}},
        "limits": {"type": "object"},
        "note": {"type": ["string", "null"]},
        "level": {"enum": [1, 2, 3]},
        "mode": {"enum": ["fast", "slow"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "anything": {},
    },
    "additionalProperties": False,
}


def typed(*words: str, schema: Any = SCHEMA) -> dict[str, Any]:
    json_text, pairs = split(words)
    assert json_text is None
    return from_pairs(pairs, schema, "disk_cleaner")


@pytest.mark.parametrize(
    ("words", "args"),
    [
        (("path=/var/tmp", "dry_run=false"), {"path": "/var/tmp", "dry_run": False}),
        (("dry_run=TRUE", "keep=-3"), {"dry_run": True, "keep": -3}),
        (("dry_run=yes",), {"dry_run": True}),
        (("ratio=2", "keep=007"), {"ratio": 2, "keep": 7}),
        (("ratio=-1.5e3",), {"ratio": -1500.0}),
        (("path=a=b", "note="), {"path": "a=b", "note": ""}),
        (("path=true", "note=null"), {"path": "true", "note": None}),
        (
            ("tags=a", "tags=b c", "ports=80", "ports=443"),
            {"tags": ["a", "b c"], "ports": [80, 443]},
        ),
        (('tags:=["x", "y"]',), {"tags": ["x", "y"]}),
        (('limits:={"max": 5}', "keep:=4"), {"limits": {"max": 5}, "keep": 4}),
        (("level=2", "mode=fast"), {"level": 2, "mode": "fast"}),
        (("either=7", "anything=7"), {"either": 7, "anything": "7"}),
        (("either=no",), {"either": False}),
        (("path=multi\nline",), {"path": "multi\nline"}),
        ((), {}),
    ],
)
def test_pairs_are_typed_from_the_schema(words: tuple[str, ...], args: dict[str, Any]) -> None:
    assert typed(*words) == args
    assert json.dumps(typed(*words)) == json.dumps(args)  # 2 stays 2, never 2.0


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (("keep=three",), "'keep=three': 'three' is not an integer"),
        (("keep=1.0",), "'keep=1.0': '1.0' is not an integer"),
        (("ratio=.5",), "'ratio=.5': '.5' is not a number"),
        (("ratio=NaN",), "is not a number"),
        (("dry_run=1",), "'dry_run=1': '1' is not a boolean"),
        (("ports=80", "ports=http"), "'ports=http': 'http' is not an integer"),
        (("level=4x",), "'level=4x': '4x' is not an integer"),
        (("limits=5",), "'limits=5': give an object as KEY:=JSON"),
        (("size=1",), "disk_cleaner has no arg 'size' (its args: anything, dry_run, either"),
        (("keep=1", "keep=2"), "'keep' is given twice ('keep=2')"),
        (("tags:=[]", "tags=a"), "'tags' is given twice"),
        (("tags=a", "tags:=[]"), "'tags' is given twice"),
        (("keep:=1,",), "'keep:=1,': the value after := is not JSON"),
        (('limits:={"a": 1, "a": 2}',), "the value after := is not JSON (duplicate key"),
    ],
)
def test_untypable_values_and_unknown_keys_are_refused(
    words: tuple[str, ...], message: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        typed(*words)
    assert message in caught.value.message
    assert caught.value.code == "invalid_request"


def test_extra_keys_follow_additional_properties() -> None:
    open_ended = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with pytest.raises(InvalidRequest, match="has no arg 'b'"):
        typed("b=1", schema=open_ended)  # absent: a typo is caught, JSON passes anything
    assert typed("b=1", schema={**open_ended, "additionalProperties": True}) == {"b": "1"}
    typed_extra = {**open_ended, "additionalProperties": {"type": "integer"}}
    assert typed("b=1", schema=typed_extra) == {"b": 1}
    assert typed("b=1", "c:=true", schema={"type": "object"}) == {"b": "1", "c": True}


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (('{"a": 1}',), ('{"a": 1}', [])),
        (("-",), ("-", [])),
        (("5",), ("5", [])),
        (("not json",), ("not json", [])),
        (("a=1", "b:=2"), (None, [("a", "=", "1"), ("b", ":=", "2")])),
    ],
)
def test_words_are_one_json_text_or_pairs(words: tuple[str, ...], expected: Any) -> None:
    assert split(words) == expected


@pytest.mark.parametrize("words", [('{"a": 1}', "b=2"), ("a=1", "-"), ("{}", "{}")])
def test_json_and_pairs_do_not_mix(words: tuple[str, ...]) -> None:
    with pytest.raises(InvalidRequest, match="give one JSON object, '-', or KEY=VALUE pairs"):
        split(words)


def test_json_errors_keep_their_messages() -> None:
    with pytest.raises(
        InvalidRequest,
        match=r"ARGS_JSON is not valid JSON: Expecting property name .* at line 1 col 2",
    ):
        parse_json("{")
    with pytest.raises(InvalidRequest, match="ARGS_JSON is ambiguous: duplicate key"):
        parse_json('{"a": 1, "a": 2}')
    assert parse_json("  ") == {}


# ---- a local run -------------------------------------------------------------------------------
@pytest.fixture
def skills(tmp_path: Path) -> Path:
    write_skill(tmp_path, "echo", "#!/bin/sh\nexec cat\n", schema=SCHEMA)
    return tmp_path


def run(skills: Path, *args: str, stdin: str | None = None) -> Any:
    argv = ["-q", "-d", str(skills), "run", *args]
    return CliRunner().invoke(cli, argv, input=stdin, catch_exceptions=False)


def test_a_local_run_takes_pairs(skills: Path) -> None:
    result = run(skills, "echo", "path=/var/tmp", "dry_run=false", "ports=22", "ports=80")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"path": "/var/tmp", "dry_run": False, "ports": [22, 80]}


def test_a_local_run_refuses_bad_pairs_with_exit_2(skills: Path) -> None:
    result = run(skills, "echo", "keep=three", "--json")
    assert result.exit_code == 2
    assert "'keep=three': 'three' is not an integer" in result.stderr
    assert json.loads(result.stdout)["error"]["code"] == "invalid_request"
    unknown = run(skills, "no_such_skill", "a=1")
    assert unknown.exit_code == 2
    assert "no_such_skill" in unknown.stderr


def test_a_local_run_still_takes_one_json_object_or_stdin(skills: Path) -> None:
    assert json.loads(run(skills, "echo", '{"keep": 1}').stdout) == {"keep": 1}
    assert json.loads(run(skills, "echo", "-", stdin='{"keep": 2}').stdout) == {"keep": 2}
    assert json.loads(run(skills, "echo").stdout) == {}
    bad = run(skills, "echo", "{")
    assert bad.exit_code == 2
    assert "ARGS_JSON is not valid JSON" in bad.stderr
