"""The run form's model: a schema → fields, posted fields → typed args (an empty field is
absent), args → field values and back, and the server's violations put on their fields."""

from __future__ import annotations

from typing import Any

import pytest

from ongrid_skills.doors.web.forms import Form
from ongrid_skills.doors.web.runform import (
    Field,
    Problems,
    fields_of,
    parse_json,
    place,
    read_fields,
    values_of,
)
from ongrid_skills.errors import Violation
from ongrid_skills.skills.schemas import validate_args
from tests.support.run_skills import FORM_SCHEMA

CONTROL = frozenset({"csrf"})


def by_key(fields: list[Field]) -> dict[str, Field]:
    return {f.key: f for f in fields}


def read(pairs: list[tuple[str, str]], schema: Any = FORM_SCHEMA) -> tuple[Any, Problems]:
    return read_fields(fields_of(schema), Form(pairs), CONTROL)


def test_each_kind_of_property_gets_its_kind_of_field() -> None:
    fields = by_key(fields_of(FORM_SCHEMA))
    assert {key: f.kind for key, f in fields.items()} == {
        "host": "input",
        "address": "input",
        "when": "input",
        "contact": "input",
        "level": "choice",
        "retries": "input",
        "ratio": "input",
        "verbose": "boolean",
        "tags": "array",
        "ports": "array",
        "limits": "object",
        "extra": "json",
    }
    assert fields["host"].required and not fields["address"].required
    assert fields["host"].name == "a/host"
    assert (fields["contact"].input_type, fields["address"].placeholder) == ("email", "192.0.2.10")
    assert fields["when"].placeholder == "2026-12-03T10:30:00Z"
    assert fields["retries"].input_type == "number"
    assert fields["retries"].attrs == {"min": "0", "max": "10", "step": "1"}
    assert fields["retries"].placeholder == "3"  # the default, shown only
    assert fields["ratio"].attrs == {"min": "0", "max": "1", "step": "any"}
    assert fields["level"].choices == [('"low"', "low"), ('"high"', "high")]
    assert fields["level"].default == "low"
    ports = fields["ports"].item
    assert ports is not None and ports.attrs["max"] == "65535"
    assert [(c.name, c.required) for c in fields["limits"].children] == [
        ("a/limits/cpu", True),
        ("a/limits/memory", False),
    ]


@pytest.mark.parametrize(
    ("prop", "kind"),
    [
        ({"type": "array", "items": {"type": "object"}}, "json"),
        ({"type": "array", "items": {"enum": ["a", "b"]}}, "array"),
        ({"type": ["integer", "string"]}, "input"),
        ({"type": ["boolean", "null"]}, "boolean"),
        ({"enum": [1, "two", None]}, "choice"),
        ({"enum": [{"a": 1}]}, "json"),
        ({}, "json"),
        (True, "json"),
        ({"anyOf": [{"type": "string"}, {"type": "object"}]}, "json"),
    ],
)
def test_what_a_form_cannot_type_well_is_edited_as_json(prop: Any, kind: str) -> None:
    [f] = fields_of({"type": "object", "properties": {"p": prop}})
    assert f.kind == kind


def test_exclusive_bounds_of_an_integer_are_the_next_integers_in() -> None:
    prop = {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}
    [f] = fields_of({"type": "object", "properties": {"n": prop}})
    assert f.attrs == {"min": "1", "max": "9", "step": "1"}
    both = {"type": "integer", "minimum": 5, "exclusiveMinimum": 0}
    [f] = fields_of({"type": "object", "properties": {"n": both}})
    assert f.attrs["min"] == "5"  # the inclusive bound as written wins


def test_objects_nest_one_level_and_deeper_ones_are_json() -> None:
    deep = {"type": "object", "properties": {"inner": {"type": "object", "properties": {}}}}
    [f] = fields_of({"type": "object", "properties": {"outer": deep}})
    assert f.kind == "object"
    assert [(c.name, c.kind) for c in f.children] == [("a/outer/inner", "json")]


def test_posted_fields_become_typed_args_and_empty_ones_are_absent() -> None:
    args, problems = read(
        [
            ("csrf", "x"),
            ("a/host", "db1"),
            ("a/address", ""),
            ("a/level", '"high"'),
            ("a/retries", "4"),
            ("a/ratio", "0.25"),
            ("a/verbose", "false"),
            ("a/tags", "web"),
            ("a/tags", ""),
            ("a/tags", "db"),
            ("a/ports", "22"),
            ("a/limits/cpu", ""),
            ("a/limits/memory", ""),
            ("a/extra", '{"k": [1, null]}'),
        ]
    )
    assert not problems, problems
    assert args == {
        "host": "db1",
        "level": "high",
        "retries": 4,
        "ratio": 0.25,
        "verbose": False,
        "tags": ["web", "db"],
        "ports": [22],
        "extra": {"k": [1, None]},
    }
    assert "retries" in args and "level" in args  # given ones only: no default was added
    assert read([("a/host", "h")])[0] == {"host": "h"}


def test_a_nested_object_is_sent_when_one_of_its_fields_is_given() -> None:
    args, problems = read([("a/host", "h"), ("a/limits/memory", "512")])
    assert args == {"host": "h", "limits": {"memory": 512}}
    assert not problems  # the missing cpu is the validator's business
    required = {"type": "object", "properties": {"o": {**FORM_SCHEMA["properties"]["limits"]}}}  # type: ignore[dict-item]
    required["required"] = ["o"]
    assert read([], required)[0] == {"o": {}}


@pytest.mark.parametrize(
    ("pairs", "pointer", "message"),
    [
        ([("a/retries", "three")], "/retries", "'three' is not an integer"),
        ([("a/ratio", "1,5")], "/ratio", "'1,5' is not a number"),
        ([("a/verbose", "maybe")], "/verbose", "'maybe' is not a boolean"),
        ([("a/level", '"medium"')], "/level", "not one of the choices"),
        ([("a/level", "low")], "/level", "not one of the choices"),
        ([("a/ports", "22"), ("a/ports", "ssh")], "/ports", "item 2: 'ssh' is not an integer"),
        ([("a/host", "a"), ("a/host", "b")], "/host", "given 2 times"),
        ([("a/extra", "{'k': 1}")], "/extra", "not JSON: Expecting property name"),
        ([("a/extra", '{"k": 1, "k": 2}')], "/extra", 'ambiguous JSON: duplicate key "k"'),
        ([("a/extra", "[" * 5000 + "]" * 5000)], "/extra", "not JSON this form accepts: nested"),
    ],
)
def test_text_that_is_not_of_its_type_is_a_problem_of_its_field(
    pairs: list[tuple[str, str]], pointer: str, message: str
) -> None:
    args, problems = read(pairs)
    [found] = problems.by_field[pointer]
    assert found.startswith(message)
    # Left out, never guessed at (an array keeps its good items, for the validator to see).
    if pointer == "/ports":
        assert args == {"ports": [22]}
    else:
        assert pointer[1:] not in args


def test_unknown_field_names_are_problems_of_the_form() -> None:
    _args, problems = read([("a/nope", "1"), ("evil", "x"), ("a/limits/cpu/deeper", "1")])
    assert problems.general == [
        "unknown field 'a/nope'",
        "unknown field 'evil'",
        "unknown field 'a/limits/cpu/deeper'",
    ]
    _args, problems = read([("a/" + "x" * 5000, "1")])
    assert len(problems.general[0]) < 100


def test_args_fill_the_fields_back_when_the_fields_can_hold_them() -> None:
    fields = fields_of(FORM_SCHEMA)
    args = {
        "host": "db1",
        "level": "high",
        "retries": 4,
        "verbose": True,
        "tags": ["a", "b"],
        "limits": {"cpu": 1.5},
        "extra": {"k": 1},
    }
    values = values_of(fields, args)
    assert values is not None
    assert values["a/level"] == ['"high"']
    assert values["a/verbose"] == ["true"]
    assert values["a/tags"] == ["a", "b"]
    assert values["a/limits/cpu"] == ["1.5"]
    pairs = [(name, text) for name, texts in values.items() for text in texts]
    assert read(pairs) == (args, Problems())


@pytest.mark.parametrize(
    "args",
    [
        {"host": ""},  # an empty field is absent: "" only travels as JSON
        {"host": 5},
        {"unknown": 1},
        {"retries": 4.0},
        {"tags": []},
        {"tags": ["a", 1]},
        {"limits": {}},
        {"level": "medium"},
        ["not", "an", "object"],
    ],
)
def test_args_the_fields_cannot_hold_stay_json(args: Any) -> None:
    assert values_of(fields_of(FORM_SCHEMA), args) is None


def test_violations_land_on_their_fields_and_the_rest_on_the_form() -> None:
    fields = fields_of(FORM_SCHEMA)
    args = {"retries": 11, "ports": [22, 0], "limits": {}, "zzz": 1}
    violations = validate_args(FORM_SCHEMA, args)
    problems = Problems()
    place(fields, violations, problems)
    assert problems.by_field == {
        "/host": ["required"],
        "/retries": ["11 is greater than the maximum of 10"],
        "/ports": ["item 2: 0 is less than the minimum of 1"],
        "/limits/cpu": ["required"],
    }
    assert problems.general == ["/: Additional properties are not allowed ('zzz' was unexpected)"]


def test_a_field_with_a_typing_problem_gets_no_second_one() -> None:
    problems = Problems()
    problems.add("/retries", "'x' is not an integer")
    place(
        fields_of(FORM_SCHEMA), [Violation("", '"retries" is a required property')], problems, True
    )
    assert problems.by_field == {"/retries": ["'x' is not an integer"]}


def test_json_text_is_parsed_strictly() -> None:
    assert parse_json('{"a": 1}') == ({"a": 1}, None)
    assert parse_json("NaN")[1] is None  # the manager refuses it: args_problem, not the parser
    value, problem = parse_json('{"a": 1,}')
    assert value is None and problem is not None and problem.startswith("not JSON")
