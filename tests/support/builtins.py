"""The built-in ops skills under test: :func:`assert_schema` checks the JSON schema derived from
a built-in's signature (the real targets they probe live in the tests themselves, or in
:mod:`tests.support.http`)."""

from __future__ import annotations

from typing import Any

import jsonschema_rs

from ongrid_skills.skills.impls import Builtin
from ongrid_skills.skills.schemas import signature_schema


def _branch(prop: dict[str, Any], key: str) -> dict[str, Any]:
    """The branch of ``prop`` (itself, or one of its anyOf) that carries ``key``."""
    if key in prop:
        return prop
    for branch in prop.get("anyOf", []):
        if key in branch:
            return dict(branch)
    raise AssertionError(f"no {key!r} in {prop}")


def assert_schema(
    fn: Builtin,
    required: list[str],
    bounds: dict[str, tuple[int | None, int | None]],
) -> dict[str, Any]:
    """An object schema, closed, valid Draft 2020-12, described, with these required params and
    these (minimum, maximum) bounds."""
    schema: dict[str, Any] = signature_schema(fn)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert sorted(schema.get("required", [])) == sorted(required)
    assert jsonschema_rs.meta.is_valid(schema)
    assert "ctx" not in schema["properties"]
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{name} has no description"
    for name, (low, high) in bounds.items():
        prop = schema["properties"][name]
        if low is not None:
            assert _branch(prop, "minimum")["minimum"] == low, name
        if high is not None:
            assert _branch(prop, "maximum")["maximum"] == high, name
    return schema
