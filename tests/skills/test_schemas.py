"""may_need_compiling: the cheap test on a manifest's text that decides whether its schema is
compiled at load time (only compiling sees a dangling $ref or a bad pattern)."""

from __future__ import annotations

import json

import pytest

from ongrid_skills.skills.schemas import _COMPILE_CHECKED, may_need_compiling


def manifest_text(schema: dict[str, object], description: str = "Cleans a cache.") -> bytes:
    return json.dumps(
        {"name": "clean", "description": description, "entry": "run.sh", "schema": schema},
        indent=2,
    ).encode()


@pytest.mark.parametrize("keyword", sorted(_COMPILE_CHECKED))
def test_every_keyword_only_compiling_checks_makes_a_manifest_need_compiling(keyword: str) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string", keyword: "x"}}}
    assert may_need_compiling(manifest_text(schema))
    compact = json.dumps({"schema": {keyword: "x"}}, separators=(",", ":")).encode()
    assert may_need_compiling(compact)


def test_a_unicode_escape_anywhere_makes_a_manifest_need_compiling() -> None:
    # "\u0024ref" is "$ref" once parsed: the text test cannot tell, so it says yes.
    raw = b'{"schema": {"properties": {"a": {"\\u0024ref": "#/x"}}}}'
    assert json.loads(raw)["schema"]["properties"]["a"] == {"$ref": "#/x"}
    assert may_need_compiling(raw)


def test_dollars_and_the_word_pattern_in_plain_text_do_not_make_a_manifest_need_compiling() -> None:
    schema = {"type": "object", "properties": {"budget": {"type": "integer", "minimum": 0}}}
    raw = manifest_text(schema, description="Spends at most $5; follows the retry pattern.")
    assert b"$" in raw and b"pattern" in raw
    assert not may_need_compiling(raw)
