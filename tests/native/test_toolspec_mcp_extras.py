"""The MCP export reads idempotent and output_schema from a skill's extra keys, in one place."""

from __future__ import annotations

from ongrid_skills import toolspec
from ongrid_skills.skills.model import Skill
from ongrid_skills.types import SkillClass

OUT = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def skill(**kw: object) -> Skill:
    return Skill(name="probe", description="Probe.", **kw)  # type: ignore[arg-type]


def test_idempotent_and_output_schema_are_exported_for_a_safe_skill() -> None:
    tool = toolspec.export(skill(extra={"idempotent": True, "output_schema": OUT}), "mcp")
    assert tool["annotations"]["idempotentHint"] is True
    assert tool["outputSchema"] == OUT


def test_without_declarations_the_hints_stay_conservative() -> None:
    tool = toolspec.export(skill(), "mcp")
    assert tool["annotations"]["idempotentHint"] is False
    assert "outputSchema" not in tool


def test_no_output_schema_for_calls_that_may_answer_with_a_pending_approval() -> None:
    mutating = skill(skill_class=SkillClass.MUTATING, extra={"output_schema": OUT})
    confirmed = skill(confirmation_required=True, extra={"output_schema": OUT})
    not_object = skill(extra={"output_schema": {"type": "array"}})
    for candidate in (mutating, confirmed, not_object):
        assert "outputSchema" not in toolspec.export(candidate, "mcp")
