"""Text → JSON values typed from a property's schema: the rule the CLI's ``KEY=VALUE`` words and
the web console's run form share."""

from __future__ import annotations

import pytest

from ongrid_skills.skills.arg_text import NotTyped, is_array, property_schema, typed, types_of


def test_a_value_takes_the_first_type_it_fits_a_string_last() -> None:
    union = {"type": ["string", "integer", "boolean", "null"]}
    assert typed("12", union) == 12
    assert typed("yes", union) is True
    assert typed("null", union) is None
    assert typed("twelve", union) == "twelve"
    assert typed("-1.5e3", {"type": "number"}) == -1500.0
    assert typed("TRUE", {"type": "boolean"}) is True


def test_an_untyped_property_takes_the_text_as_it_is() -> None:
    assert typed("8080", {}) == "8080"
    assert typed("8080", True) == "8080"


def test_enum_const_and_branches_give_their_values_types() -> None:
    assert types_of({"enum": [1, "a", None]}) == ["null", "integer", "string"]
    assert types_of({"const": 2.5}) == ["number"]
    assert types_of({"anyOf": [{"type": "integer"}, {"oneOf": "not a list"}]}) == ["integer"]
    assert types_of({"oneOf": [{"type": "string"}, {"type": "string"}]}) == ["string"]


@pytest.mark.parametrize(
    ("raw", "prop"),
    [
        ("1.5", {"type": "integer"}),
        ("0x10", {"type": "integer"}),
        ("1" * 5000, {"type": "integer"}),  # past Python's own digit limit: refused, not a crash
        ("NaN", {"type": "number"}),
        ("01", {"type": "number"}),
        ("maybe", {"type": "boolean"}),
        ("[1]", {"type": "array"}),
    ],
)
def test_text_that_fits_no_type_is_refused_saying_which_types(raw: str, prop: object) -> None:
    with pytest.raises(NotTyped) as caught:
        typed(raw, prop)
    assert caught.value.allowed == types_of(prop)
    assert caught.value.needs_json is (prop == {"type": "array"})


def test_which_keys_a_schema_lets_exist() -> None:
    closed = {"properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    assert property_schema(closed, "a") == {"type": "integer"}
    assert property_schema(closed, "b") is None
    assert property_schema({"properties": {"a": {}}}, "b") is None
    assert property_schema({"properties": {}, "additionalProperties": True}, "b") == {}
    typed_extra = {"properties": {}, "additionalProperties": {"type": "number"}}
    assert property_schema(typed_extra, "b") == {"type": "number"}
    assert property_schema({"type": "object"}, "anything") == {}


def test_only_an_array_or_nullable_array_is_an_array() -> None:
    assert is_array({"type": "array"})
    assert is_array({"type": ["array", "null"]})
    assert not is_array({"type": ["array", "string"]})
    assert not is_array({})
