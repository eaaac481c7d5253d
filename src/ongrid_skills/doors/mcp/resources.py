"""Skills as MCP resources: ``skill://<name>/SKILL.md`` and ``skill://<name>/<path>``.

What a view (persona, role) may see of the SKILL.md skills, as MCP clients expect skills:

- ``resources/list`` pages through the view's SKILL.md skills (:data:`PAGE_SKILLS` a page, by
  name; one entry per SKILL.md even when it declares several tools): each one's ``SKILL.md``,
  then the files ``read_skill`` lists for it;
- ``resources/templates/list`` offers ``skill://{name}/{+path}`` for the rest;
- ``resources/read`` resolves the name (aliases too: ``superpowers:brainstorming``) among the
  skills the view sees and serves the file through :mod:`ongrid_skills.skills.bundle`, confined
  to the skill's folder exactly like ``read_skill_file``. Its refusals are MCP errors: -32002
  (resource not found) for an unknown skill or a missing file, invalid params otherwise; the
  refusal's code (``outside_skill``, ``binary_file``…) is in the error's ``data``.

A skill the view would not be offered is neither listed nor read. This module never reads a file
outside a skill's folder and answers no permission question itself (the gate does).
"""

from __future__ import annotations

import mimetypes
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ongrid_skills.errors import BundledFileError
from ongrid_skills.governance.gate import offered
from ongrid_skills.skills.bundle import list_files, read_file, substitute
from ongrid_skills.skills.frontmatter import read_text
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import Role

SCHEME = "skill://"
SKILL_FILE = "SKILL.md"
PAGE_SKILLS = 50
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource
TEMPLATE = types.ResourceTemplate(
    name="skill-file",
    title="A file of a skill",
    uri_template="skill://{name}/{+path}",
    description="A file a skill ships in its folder; SKILL.md is its instructions.",
)


def visible_skills(registry: Registry, persona: str, role: Role | None) -> list[Skill]:
    """One skill per SKILL.md the view may see, by name (a multi-tool SKILL.md: its first)."""
    who = registry.persona(persona)
    seen: set[str] = set()
    out = []
    for skill in registry.list():
        if skill.base_dir is None or skill.origin in seen or not offered(skill, who, role):
            continue
        seen.add(skill.origin)
        out.append(skill)
    return out


def list_resources(
    registry: Registry, persona: str, role: Role | None, cursor: str | None
) -> types.ListResourcesResult:
    skills = visible_skills(registry, persona, role)
    start = _page_start(cursor, len(skills))
    resources: list[types.Resource] = []
    for skill in skills[start : start + PAGE_SKILLS]:
        resources.append(
            types.Resource(
                name=f"{skill.name}/{SKILL_FILE}",
                title=skill.name,
                uri=uri_of(skill.name, SKILL_FILE),
                description=skill.description,
                mime_type="text/markdown",
            )
        )
        assert skill.base_dir is not None  # visible_skills keeps SKILL.md skills only
        files, _ = list_files(skill.base_dir)
        resources.extend(
            types.Resource(
                name=f"{skill.name}/{found.path}",
                uri=uri_of(skill.name, found.path),
                mime_type=_mime(found.path),
                size=found.size,
            )
            for found in files
        )
    after = start + PAGE_SKILLS
    return types.ListResourcesResult(
        resources=resources, next_cursor=str(after) if after < len(skills) else None
    )


def read_resource(
    registry: Registry, persona: str, role: Role | None, uri: str
) -> types.ReadResourceResult:
    name, path = _parse(uri)
    skill = registry.lookup(name)
    if (
        skill is None
        or skill.base_dir is None
        or not offered(skill, registry.persona(persona), role)
    ):
        raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: no skill {name!r}", {"uri": uri})
    if path == SKILL_FILE:
        text = substitute(read_text(skill.origin), skill.base_dir)
        mime = "text/markdown"
    else:
        try:
            text = read_file(skill.base_dir, path).text
        except BundledFileError as exc:
            code = RESOURCE_NOT_FOUND if exc.code == "file_not_found" else types.INVALID_PARAMS
            raise MCPError(code, exc.message, {"uri": uri, "code": exc.code}) from None
        mime = _mime(path)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
    )


def uri_of(name: str, path: str) -> str:
    return f"{SCHEME}{name}/{quote(path, safe='/')}"


def _parse(uri: str) -> tuple[str, str]:
    if not uri.startswith(SCHEME):
        raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri!r} is not a skill:// URI")
    name, _, path = uri[len(SCHEME) :].partition("/")
    if not name or not path:
        raise MCPError(types.INVALID_PARAMS, f"{uri!r}: expected skill://<name>/<path>")
    return unquote(name), unquote(path)


def _page_start(cursor: str | None, total: int) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or int(cursor) > total:
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}")
    return int(cursor)


def _mime(path: str) -> str:
    if path.lower().endswith(".md"):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "text/plain"
