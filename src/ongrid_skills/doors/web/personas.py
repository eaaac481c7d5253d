"""Personas: ``/personas`` (each with its permission mode and how many tools it is offered) and
``/personas/{name}`` (its profile, its prompt, the skills it is offered, and the tool
definitions a model is sent, in a provider's format: the ``GET /v1/personas/{name}/tools``
view).

What a persona is offered is asked of the gate (``offered``) and of ``toolspec``, exactly as the
REST routes ask; any logged-in principal may read it, as any token may through REST. Each
persona shows its source (``bundled``, ``file``, ``stored``); admins get the editor's links
for the stored ones (``persona_editor.py``) and see the stored personas a file hides.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from ongrid_skills import toolspec
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.governance.gate import has_role, offered, persona_usable
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.persona_doc import source_of
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import Role

router = APIRouter()

FORMATS = ("openai", "anthropic", "mcp")


def offered_to(registry: Registry, persona: Persona) -> list[Skill]:
    """The skills ``persona`` is offered (the ``offered`` list of ``GET /v1/personas/{name}``)."""
    return registry.list(keep=lambda skill: offered(skill, persona))


@router.get("/personas")
async def personas(request: Request, session: Session) -> Response:
    manager = manager_of(request)
    registry = manager.registry
    rows = [
        (persona, source_of(persona), len(offered_to(registry, persona)))
        for persona in sorted(registry.personas.values(), key=lambda p: p.name)
    ]
    admin = has_role(session.principal, Role.ADMIN)
    unused = []
    if admin:  # stored personas a file hides, or whose document no longer builds
        entries = await asyncio.to_thread(manager.personas.entries)
        unused = [e for e in entries if e.persona is None or e.shadowed_by is not None]
    return render(
        request,
        "personas.html",
        section="personas",
        title="Personas",
        rows=rows,
        admin=admin,
        unused=unused,
    )


@router.get("/personas/{name}")
async def persona_page(
    request: Request,
    name: str,
    session: Session,
    fmt: Annotated[str, Query(alias="format", pattern="^(openai|anthropic|mcp)$")] = "openai",
    message: Annotated[str | None, Query(max_length=4000)] = None,
) -> Response:
    registry = manager_of(request).registry
    persona = registry.persona(name)
    skills = offered_to(registry, persona)
    tools = toolspec.offered(registry, persona, message or None)
    return render(
        request,
        "persona.html",
        section="personas",
        title=persona.name,
        persona=persona,
        source=source_of(persona),
        editable=source_of(persona) == "stored" and has_role(session.principal, Role.ADMIN),
        may_chat=persona_usable(persona, session.principal.role),
        skills=skills,
        fmt=fmt,
        formats=FORMATS,
        message=message or "",
        tools_json=json.dumps(
            {"format": fmt, "tools": toolspec.export_all(tools, fmt), "total": len(tools)},
            indent=2,
            ensure_ascii=False,
        ),
        tool_count=len(tools),
        extra=json.dumps(persona.extra, indent=2, ensure_ascii=False, default=str)
        if persona.extra
        else None,
    )
