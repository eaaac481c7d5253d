"""The REST routes that write personas at run time (SPEC §19, docs/personas.md), admin only:

- ``POST /v1/personas`` — a new stored persona (201);
- ``PUT /v1/personas/{name}`` — its whole document replaced (a field left out takes its default);
- ``DELETE /v1/personas/{name}`` — gone (204); approval requests made as it are void.

The body is the persona file in JSON: the frontmatter's fields by their names and ``prompt``
(the Markdown body), built by the persona files' own builder (``skills/persona_doc.py``). File
and bundled personas are read-only: a name clash is 409. Each change is audited
(``persona.created``/``updated``/``deleted``) and told to the MCP clients (``list_changed``);
the answer is the persona as ``GET /v1/personas/{name}`` shows it. Reading stays in
``routes.py``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ongrid_skills.doors.rest.auth import request_principal
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.governance.gate import offered, require_role
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import Role

router = APIRouter()
PATH = "/v1/personas"
Name = Annotated[str, Path(min_length=1, max_length=64)]


async def admin_manager(
    request: Request, caller: Annotated[Principal, Depends(request_principal)]
) -> tuple[Principal, Manager]:
    """The caller (an admin, else 403) and the manager; before any body is read."""
    require_role(caller, Role.ADMIN)
    manager: Manager = request.app.state.manager
    return caller, manager


Admin = Annotated[tuple[Principal, Manager], Depends(admin_manager)]


def _typed(kind: str, description: str, **schema: Any) -> Any:
    return Field(default=None, description=description, json_schema_extra={"type": kind, **schema})


class PersonaBody(BaseModel):
    """A persona file in JSON; every field is checked by the persona builder, whose messages
    the 400 answers carry (an unknown field is refused too)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})

    name: Any = _typed("string", "Required on POST; on PUT, the path's name if given.")
    description: Any = _typed("string", "Required.")
    when_to_use: Any = _typed("string", "Required.")
    permission_mode: Any = _typed(
        "string",
        "read-only (default), mutating-with-confirm or dual-sign-required.",
        enum=["read-only", "mutating-with-confirm", "dual-sign-required"],
    )
    tools: Any = _typed(
        "array", "Whitelist: names, prefix*, *suffix or *.", items={"type": "string"}
    )
    disallowed_tools: Any = _typed(
        "array", "Blacklist, wins over the whitelist.", items={"type": "string"}
    )
    max_turns: Any = _typed("integer", "Agent loop bound, 1..1000 (default 10).")
    model: Any = _typed("string", "The model; else the configured default.")
    critical_reminder: Any = _typed("string", "Re-sent every turn.")
    can_delegate: Any = _typed("boolean", "Offered the delegate tool (default false).")
    prompt: Any = _typed("string", "The Markdown body: the system prompt (at most 64 KiB).")


def persona_body(registry: Registry, persona: Persona) -> dict[str, Any]:
    """A persona as ``GET /v1/personas/{name}`` shows it: summary, prompt, offered skills."""
    body = persona.summary()
    body["prompt"] = persona.prompt
    body["offered"] = [s.name for s in registry.list(keep=lambda s: offered(s, persona))]
    return body


@router.post(PATH, status_code=201, responses=responses(403, 409))
async def create_persona(body: PersonaBody, admin: Admin) -> dict[str, Any]:
    """Store a new persona; refused (409) when a file, bundled or stored persona has its name."""
    caller, manager = admin
    document = body.model_dump(exclude_unset=True)
    persona = await asyncio.to_thread(manager.personas.create, document, caller.name)
    manager.tell_listeners()
    registry = manager.registry
    return persona_body(registry, registry.persona(persona.name))


@router.put(PATH + "/{name}", responses=responses(403, 404, 409))
async def update_persona(name: Name, body: PersonaBody, admin: Admin) -> dict[str, Any]:
    """Replace a stored persona's document; file and bundled personas are read-only (409)."""
    caller, manager = admin
    document = body.model_dump(exclude_unset=True)
    await asyncio.to_thread(manager.personas.update, name, document, caller.name)
    manager.tell_listeners()
    registry = manager.registry
    return persona_body(registry, registry.persona(name))


@router.delete(PATH + "/{name}", status_code=204, responses=responses(403, 404, 409))
async def delete_persona(name: Name, admin: Admin) -> Response:
    """Delete a stored persona; file and bundled personas are read-only (409)."""
    caller, manager = admin
    await asyncio.to_thread(manager.personas.delete, name, caller.name)
    manager.tell_listeners()
    return Response(status_code=204)
