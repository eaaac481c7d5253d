"""The REST routes of credentials (SPEC §18, docs/credentials.md), admin only, each change audited:

- ``GET /v1/credentials`` — names, field kinds, bindings, who and when (never a value);
- ``POST /v1/credentials`` — ``{"name", "values": {field: value}, "references": {field: ref}}``;
- ``POST /v1/credentials/{name}/rotate`` — new values or references for some fields;
- ``DELETE /v1/credentials/{name}`` — a credential nothing is bound to;
- ``POST /v1/credentials/{name}/bind`` — ``{"slot", "skill"}`` or ``{"slot", "pack"}``;
- ``POST /v1/credentials/unbind`` — ``{"slot", "skill"}`` or ``{"slot", "pack"}``.

Values travel only in request bodies (never a URL or a query string, which proxies log) and
are never in a response. The work is :class:`ongrid_skills.credentials.service.Credentials`
(blocking store writes run in a worker thread); errors are mapped in ``errors.py``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ongrid_skills.credentials.service import Credentials
from ongrid_skills.doors.rest.auth import request_principal
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.governance.gate import require_role
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.types import Role

router = APIRouter()
PATH = "/v1/credentials"


async def admin_credentials(
    request: Request, caller: Annotated[Principal, Depends(request_principal)]
) -> tuple[Principal, Manager, Credentials]:
    """The caller (an admin, else 403), the manager and its credential store."""
    require_role(caller, Role.ADMIN)
    manager: Manager = request.app.state.manager
    return caller, manager, manager.credentials


Admin = Annotated[tuple[Principal, Manager, Credentials], Depends(admin_credentials)]
Field64 = Annotated[str, Field(min_length=1, max_length=64)]


class CredentialBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Field64
    values: dict[Field64, Annotated[str, Field(max_length=65536)]] = Field(
        default_factory=dict, description="Field values: sealed at once, never returned."
    )
    references: dict[Field64, Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=dict,
        description="Fields read at call time: file:/path, env:NAME or command:NAME [ARGS].",
    )


class RotateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: dict[Field64, Annotated[str, Field(max_length=65536)]] = Field(default_factory=dict)
    references: dict[Field64, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)


class BindingBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slot: Field64
    skill: Field64 | None = Field(default=None, description="Bind to this skill's slot.")
    pack: Field64 | None = Field(default=None, description="Bind to the slot of a pack's skills.")


def _actor(caller: Principal) -> str:
    return caller.name


@router.get(PATH, responses=responses(403))
async def list_credentials(admin: Admin) -> dict[str, Any]:
    """Every credential: names, field kinds, bindings, who and when; never a value."""
    items = [c.to_dict() for c in await asyncio.to_thread(admin[2].all)]
    return {"items": items, "total": len(items)}


@router.post(PATH, status_code=201, responses=responses(400, 403, 409))
async def create_credential(body: CredentialBody, admin: Admin) -> dict[str, Any]:
    """Create a credential; its values are sealed and never shown again."""
    caller, _manager, creds = admin
    info = await asyncio.to_thread(
        creds.create, body.name, body.values, body.references, _actor(caller)
    )
    return info.to_dict()


@router.post(PATH + "/{name}/rotate", responses=responses(400, 403, 404))
async def rotate_credential(name: str, body: RotateBody, admin: Admin) -> dict[str, Any]:
    """New values or references for some fields; the next call uses them."""
    caller, _manager, creds = admin
    info = await asyncio.to_thread(creds.rotate, name, body.values, body.references, _actor(caller))
    return info.to_dict()


@router.delete(PATH + "/{name}", status_code=204, responses=responses(403, 404, 409))
async def delete_credential(name: str, admin: Admin) -> Response:
    """Delete a credential nothing is bound to."""
    caller, _manager, creds = admin
    await asyncio.to_thread(creds.delete, name, _actor(caller))
    return Response(status_code=204)


@router.post(PATH + "/{name}/bind", responses=responses(400, 403, 404))
async def bind_credential(name: str, body: BindingBody, admin: Admin) -> dict[str, Any]:
    """Bind a credential to a skill's slot (or a pack's); pending approvals of the skills
    concerned are void."""
    caller, manager, _creds = admin
    previous = await manager.bind_credential(
        name, body.slot, _actor(caller), skill=body.skill, pack=body.pack
    )
    return {"replaced": previous.credential if previous is not None else None}


@router.post(PATH + "/unbind", responses=responses(400, 403, 404))
async def unbind_credential(body: BindingBody, admin: Admin) -> dict[str, Any]:
    """Unbind a slot: the skill is unavailable until something is bound again."""
    caller, manager, _creds = admin
    previous = await manager.unbind_credential(
        body.slot, _actor(caller), skill=body.skill, pack=body.pack
    )
    return {"unbound": previous.credential}
