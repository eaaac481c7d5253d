"""The REST routes of packs (SPEC §11, docs/packs.md), admin only, each change audited:

- ``GET /v1/packs`` — the installed packs; ``GET /v1/packs/{id}`` — one, with its versions;
- ``GET /v1/packs/available?q=`` — what the marketplace indexes offer;
- ``POST /v1/packs`` — install: ``multipart/form-data`` with the archive (``file``), an
  optional ``signature`` file and ``allow_unsigned``, or JSON ``{"source", "allow_unsigned"}``
  (a URL, a git URL or a pack id: a path of the server is its CLI's to install); with
  ``dry_run`` (either form), the capability summary of what it would bring, nothing changed;
- ``DELETE /v1/packs/{id}`` (idempotent: 200 with ``removed: false`` when no version of it is
  active), ``POST /v1/packs/{id}/rollback``, ``POST /v1/packs/{id}/upgrade``.

A change answers once the registry holds it (the reload is audited as the caller, and MCP
clients get ``list_changed``). Work that blocks (fetching, unpacking, the store) runs in a
worker thread. Routes translate HTTP only: the work is
:class:`ongrid_skills.packs.service.Packs`, the upload and the reload after a change are
:mod:`ongrid_skills.doors.pack_changes` (shared with the console's packs page), errors are
mapped in ``errors.py``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError
from starlette.datastructures import UploadFile

from ongrid_skills import strict_json
from ongrid_skills.doors.pack_changes import (
    ACTIVATING,
    inspect_upload,
    install_upload,
    packs_of,
    settle,
)
from ongrid_skills.doors.rest.auth import request_principal
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.governance.gate import require_role
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.packs.install import Outcome
from ongrid_skills.packs.service import Packs
from ongrid_skills.types import Role

router = APIRouter()
PACKS_PATH = "/v1/packs"


async def admin_packs(
    request: Request, caller: Annotated[Principal, Depends(request_principal)]
) -> tuple[Principal, Manager, Packs]:
    """The caller (an admin, else 403), the manager, and the packs of its data dir."""
    require_role(caller, Role.ADMIN)
    manager: Manager = request.app.state.manager
    return caller, manager, packs_of(manager)


Admin = Annotated[tuple[Principal, Manager, Packs], Depends(admin_packs)]


class SourceBody(BaseModel):
    """Install from a source the server fetches."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(
        min_length=1,
        max_length=4096,
        description="An https:// URL of an archive, a git URL (git+URL, URL.git, @REF; "
        "owner/repo[@REF] when ONGRID_PACK_GIT_FORGE names a forge), or a pack id ID or "
        "ID@VERSION of the marketplace indexes.",
    )
    allow_unsigned: StrictBool = Field(
        default=False, description="Install it even when not signed by a trusted key."
    )
    dry_run: StrictBool = Field(
        default=False,
        description="Fetch and check it, and answer what it brings (its capability summary); "
        "install nothing.",
    )


class UpgradeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow_unsigned: StrictBool = False


_INSTALL_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": SourceBody.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "signature": {"type": "string", "format": "binary"},
                        "allow_unsigned": {"type": "boolean"},
                        "dry_run": {"type": "boolean"},
                    },
                }
            },
        },
    }
}


#: A change that made a version active answers 201; one that found it active already, 200.
_CHANGED: dict[int | str, dict[str, Any]] = {
    200: {"description": "Done, or nothing to do (action: unchanged)"},
    201: {"description": "A version was installed and is active"},
}


async def _changed(manager: Manager, caller: Principal, outcome: Outcome) -> JSONResponse:
    """Answer a change once the registry holds it."""
    await settle(manager, caller.name, outcome)
    status = 201 if outcome.action in ACTIVATING else 200
    return JSONResponse(outcome.to_dict(), status_code=status)


@router.get(PACKS_PATH, responses=responses(403))
async def list_packs(admin: Admin) -> dict[str, Any]:
    """The installed packs: active version, source, digest, signer, skills, versions kept."""
    items = await asyncio.to_thread(admin[2].installed)
    return {"items": items, "total": len(items)}


@router.get(f"{PACKS_PATH}/available", responses=responses(403))
async def available_packs(
    admin: Admin, q: Annotated[str, Query(max_length=200)] = ""
) -> dict[str, Any]:
    """What the marketplace indexes offer (id or description holding ``q``), with the version
    installed here; ``problems`` names the indexes that could not be read."""
    return await asyncio.to_thread(admin[2].available, q)


@router.get(f"{PACKS_PATH}/{{pack_id}}", responses=responses(403, 404))
async def show_pack(admin: Admin, pack_id: str) -> dict[str, Any]:
    """One installed pack, with every version kept and its state."""
    return await asyncio.to_thread(admin[2].show, pack_id)


@router.post(
    PACKS_PATH, responses={**responses(403, 404, 409, 502), **_CHANGED}, openapi_extra=_INSTALL_BODY
)
async def install_pack(request: Request, admin: Admin) -> JSONResponse:
    """Install a pack (an upload or a source) and make it the active version: 201 with what
    changed, 200 when that version was already active. With ``dry_run``: 200 with what it
    would bring (its capability summary), and nothing changed."""
    caller, manager, packs = admin
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind == "multipart/form-data":
        uploaded = await _upload(request, caller, packs)
        if isinstance(uploaded, JSONResponse):  # a dry run
            return uploaded
        outcome = uploaded
    elif kind == "application/json":
        body = _source_body(await request.body())
        if body.dry_run:
            view = await asyncio.to_thread(
                packs.dry_run, body.source, allow_unsigned=body.allow_unsigned, local=False
            )
            return JSONResponse(view)
        outcome = await asyncio.to_thread(
            packs.install,
            body.source,
            caller.name,
            allow_unsigned=body.allow_unsigned,
            local=False,
        )
    else:
        raise InvalidRequest("send multipart/form-data (an upload) or application/json (a source)")
    return await _changed(manager, caller, outcome)


def _source_body(raw: bytes) -> SourceBody:
    try:
        return SourceBody.model_validate(strict_json.loads(raw))
    except ValidationError as exc:
        listed = "; ".join(f"/{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InvalidRequest(f"invalid request body: {listed}") from None
    except ValueError as exc:
        raise InvalidRequest(f"invalid request body: {exc}") from None


async def _upload(request: Request, caller: Principal, packs: Packs) -> Outcome | JSONResponse:
    form = await request.form(max_files=2, max_fields=4)
    try:
        upload = form.get("file")
        signature = form.get("signature")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("multipart field 'file' (the pack archive) is required")
        if signature is not None and not isinstance(signature, UploadFile):
            raise InvalidRequest("multipart field 'signature' must be a file")
        flags = {}
        for name in ("allow_unsigned", "dry_run"):
            flags[name] = form.get(name, "false")
            if flags[name] not in ("true", "false"):
                raise InvalidRequest(f"{name} must be true or false")
        allow = flags["allow_unsigned"] == "true"
        if flags["dry_run"] == "true":
            view = await inspect_upload(packs, upload, signature, allow_unsigned=allow)
            return JSONResponse(view)
        return await install_upload(packs, caller.name, upload, signature, allow_unsigned=allow)
    finally:
        await form.close()


@router.delete(f"{PACKS_PATH}/{{pack_id}}", responses=responses(403, 404, 409))
async def remove_pack(admin: Admin, pack_id: str) -> JSONResponse:
    """Withdraw every skill and persona of the pack at once (files go once no call runs).
    Idempotent: a pack that is not active answers 200 with ``removed: false``."""
    caller, manager, packs = admin
    outcome = await asyncio.to_thread(packs.remove, pack_id, caller.name)
    return await _changed(manager, caller, outcome)


@router.post(f"{PACKS_PATH}/{{pack_id}}/rollback", responses=responses(403, 404, 409))
async def rollback_pack(admin: Admin, pack_id: str) -> JSONResponse:
    """Switch back to the version that was active before the current one."""
    caller, manager, packs = admin
    outcome = await asyncio.to_thread(packs.rollback, pack_id, caller.name)
    return await _changed(manager, caller, outcome)


@router.post(
    f"{PACKS_PATH}/{{pack_id}}/upgrade", responses={**responses(403, 404, 409, 502), **_CHANGED}
)
async def upgrade_pack(admin: Admin, pack_id: str, body: UpgradeBody | None = None) -> JSONResponse:
    """Install the newest version the indexes offer, when newer than the active one."""
    caller, manager, packs = admin
    allow = body.allow_unsigned if body is not None else False
    outcome = await asyncio.to_thread(packs.upgrade, pack_id, caller.name, allow_unsigned=allow)
    return await _changed(manager, caller, outcome)
