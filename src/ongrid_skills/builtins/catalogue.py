"""The internal catalogue tools: ``read_skill`` and ``read_skill_file`` (progressive disclosure:
a skill's instructions, then the files it ships) and ``search_skills``.

A skill is named by its tool name or an alias (the name its author wrote, ``pack:name``). Files
are served by :mod:`ongrid_skills.skills.bundle`, confined to the skill's folder; its refusals
keep their codes (``outside_skill``, ``file_not_found``, ``not_a_file``, ``file_too_large``,
``binary_file``) as the call's ``error.code``.

The first line of each function's docstring is the tool's description a model reads
(``skills.registry.internal_skills``), and its signature is the tool's schema: edit both as such.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Catalogue
from ongrid_skills.errors import BundledFileError
from ongrid_skills.skills.bundle import list_files, read_file, substitute
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import CATALOGUE_TOOLS
from ongrid_skills.skills.skill_md import read_body

__all__ = ["read_skill", "read_skill_file", "search_skills"]


def read_skill(
    ctx: BuiltinContext,
    name: Annotated[str, Field(description="Name of the skill to read.", max_length=64)],
) -> dict[str, Any]:
    """Read a skill: its instructions (SKILL.md body), tools, declared fields, folder and files.

    Its bundled files (references, templates, scripts) are listed with their sizes; read one
    with read_skill_file."""
    registry = ctx.registry
    if registry is None:
        raise BuiltinFailure("no registry to read from")
    skill = registry.lookup(name)
    if skill is None:
        raise BuiltinFailure(f"no skill named {name!r}; use search_skills to find one")
    folder = skill.base_dir
    body = substitute(read_body(skill), folder) if folder is not None else ""
    files, truncated = list_files(folder) if folder is not None else ([], False)
    if skill.group is not None:  # a SKILL.md: every tool it declares
        tools = [
            s.name
            for s in registry.skills.values()
            if s.group == skill.group and s.kind != "instructions"
        ]
    else:  # a skill.json or an internal tool: the skill is its one tool
        tools = [skill.name] if skill.kind != "instructions" else []
    missing = skill.summary().get("unavailable_tools")  # tools this build cannot run
    return {
        "name": skill.name,
        "description": skill.description,
        "when_to_use": skill.when_to_use,
        "kind": skill.kind,
        "available": skill.available,
        "unavailable_reason": skill.unavailable_reason,
        "tools": sorted(tools),
        **({"unavailable_tools": missing} if missing else {}),
        "body": body,
        "extra": skill.extra,
        "aliases": list(skill.aliases),
        "folder": folder,
        "files": [f.to_dict() for f in files],
        "files_truncated": truncated,
    }


def read_skill_file(
    ctx: BuiltinContext,
    name: Annotated[str, Field(description="Name of the skill.", max_length=64)],
    path: Annotated[
        str,
        Field(
            description="Path of the file relative to the skill's folder, as read_skill lists it.",
            min_length=1,
            max_length=1024,
        ),
    ],
) -> dict[str, Any]:
    """Read one file a skill ships in its folder (a reference, template or script), as text."""
    skill = _skill(ctx.registry, name)
    if skill.base_dir is None:
        raise BuiltinFailure(
            f"{skill.name} ships no files (not a SKILL.md skill)", "file_not_found"
        )
    try:
        found = read_file(skill.base_dir, path)
    except BundledFileError as exc:
        raise BuiltinFailure(exc.message, exc.code) from None
    return {"name": skill.name, "path": found.path, "size": found.size, "text": found.text}


def _skill(registry: Catalogue | None, name: str) -> Skill:
    if registry is None:
        raise BuiltinFailure("no registry to read from")
    skill = registry.lookup(name)
    if skill is None:
        raise BuiltinFailure(f"no skill named {name!r}; use search_skills to find one", "not_found")
    return skill


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
