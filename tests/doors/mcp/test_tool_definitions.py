"""tools/list entries: the tool export of each skill, plus what a skill declares (idempotence, an
output schema) — the latter only where every answer of the call is the skill's own result."""

from __future__ import annotations

from typing import Any

from ongrid_skills import toolspec
from ongrid_skills.doors.mcp.server import tool_definition
from ongrid_skills.skills.model import Skill
from ongrid_skills.types import SkillClass

OUTPUT = {"type": "object", "properties": {"free_bytes": {"type": "integer"}}}


def skill(name: str, skill_class: SkillClass = SkillClass.SAFE, **extra: Any) -> Skill:
    return Skill(name=name, description=f"{name}.", skill_class=skill_class, extra=extra or None)


def test_a_tool_is_the_mcp_export_of_its_skill() -> None:
    plain = skill("disk_usage")
    assert tool_definition(plain) == toolspec.export(plain, "mcp")
    assert tool_definition(plain)["annotations"]["idempotentHint"] is False


def test_a_declared_idempotent_skill_says_so() -> None:
    assert tool_definition(skill("probe", idempotent=True))["annotations"]["idempotentHint"]
    assert not tool_definition(skill("probe", idempotent="yes"))["annotations"]["idempotentHint"]


def test_an_output_schema_is_advertised_only_when_every_answer_is_the_result() -> None:
    assert tool_definition(skill("disk_usage", output_schema=OUTPUT))["outputSchema"] == OUTPUT
    mutating = skill("disk_clean", SkillClass.MUTATING, output_schema=OUTPUT)
    assert "outputSchema" not in tool_definition(mutating)  # may answer "pending approval"
    confirmed = skill("disk_usage", output_schema=OUTPUT)
    confirmed.confirmation_required = True
    assert "outputSchema" not in tool_definition(confirmed)
    not_an_object = skill("listing", output_schema={"type": "array"})
    assert "outputSchema" not in tool_definition(not_an_object)
