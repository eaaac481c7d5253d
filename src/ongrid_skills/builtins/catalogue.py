"""The internal catalogue tools: ``read_skill`` (progressive disclosure) and ``search_skills``.

The first line of each function's docstring is the tool's description a model reads
(``skills.registry.internal_skills``), and its signature is the tool's schema: edit both as such.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import CATALOGUE_TOOLS
from ongrid_skills.skills.skill_md import read_body

__all__ = ["read_skill", "search_skills"]


def read_skill(
    ctx: BuiltinContext,
    name: Annotated[str, Field(description="Name of the skill to read.", max_length=64)],
) -> dict[str, Any]:
    """Read the full instructions of a skill (the body of its SKILL.md) and its tools."""
    registry = ctx.registry
    if registry is None:
        raise BuiltinFailure("no registry to read from")
    skill = registry.skills.get(name)
    if skill is None:
        raise BuiltinFailure(f"no skill named {name!r}; use search_skills to find one")
    body = read_body(skill) if skill.origin.endswith("SKILL.md") else ""
    if skill.group is not None:  # a SKILL.md: every tool it declares
        tools = [
            s.name
            for s in registry.skills.values()
            if s.group == skill.group and s.kind != "instructions"
        ]
    else:  # a skill.json or an internal tool: the skill is its one tool
        tools = [skill.name] if skill.kind != "instructions" else []
    return {
        "name": skill.name,
        "description": skill.description,
        "when_to_use": skill.when_to_use,
        "kind": skill.kind,
        "available": skill.available,
        "unavailable_reason": skill.unavailable_reason,
        "tools": sorted(tools),
        "body": body,
    }


def search_skills(
    ctx: BuiltinContext,
    query: Annotated[str, Field(description="What you need, in a few words.", max_length=500)],
    limit: Annotated[int, Field(ge=1, le=50, description="How many results.")] = 10,
) -> dict[str, Any]:
    """Find skills by what they do (BM25 over name, description and when to use)."""
    registry = ctx.registry
    if registry is None:
        raise BuiltinFailure("no registry to search")

    def keep(skill: Skill) -> bool:
        return skill.available and skill.name not in CATALOGUE_TOOLS and ctx.permits(skill)

    hits = registry.search_index().search(query, limit, keep)
    return {
        "query": query,
        "results": [
            {
                "name": s.name,
                "description": s.description,
                "class": s.skill_class.value,
                "kind": s.kind,
                "when_to_use": s.when_to_use,
                "score": score,
            }
            for s, score in hits
        ],
    }
