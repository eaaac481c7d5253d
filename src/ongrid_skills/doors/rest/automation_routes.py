"""The REST routes of triggers and schedules (SPEC §21, docs/triggers.md).

- ``POST /v1/triggers/{name}`` — an alert delivery (Alertmanager's webhook, or generic JSON),
  authenticated by the trigger's own token, not an API token (the gate lets this one path
  through to be checked here: ``auth.TRIGGER_DELIVERY``);
- ``GET /v1/triggers`` (operators) ; ``GET /v1/triggers/{name}`` ; ``PUT`` (admin: create,
  answering the new token once, or replace the rules) ; ``DELETE`` ; ``POST …/token`` (admin:
  a new token, the old one stops working);
- ``GET /v1/schedules`` (operators) ; ``GET|PUT|DELETE /v1/schedules/{name}`` (admin to
  change) ; ``POST /v1/schedules/{name}/pause|resume|run`` (admin).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Request, Response

from ongrid_skills.automation import Automation
from ongrid_skills.doors.rest.auth import request_principal
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.governance.gate import require_role
from ongrid_skills.governance.principal import Principal
from ongrid_skills.types import Role

router = APIRouter()
Name = Annotated[str, Path(min_length=1, max_length=64)]


def _automation(request: Request) -> Automation:
    automation: Automation = request.app.state.automation
    return automation


async def _operator(
    request: Request, caller: Annotated[Principal, Depends(request_principal)]
) -> tuple[Principal, Automation]:
    require_role(caller, Role.OPERATOR)
    return caller, _automation(request)


async def _admin(
    request: Request, caller: Annotated[Principal, Depends(request_principal)]
) -> tuple[Principal, Automation]:
    require_role(caller, Role.ADMIN)
    return caller, _automation(request)


Operator = Annotated[tuple[Principal, Automation], Depends(_operator)]
Admin = Annotated[tuple[Principal, Automation], Depends(_admin)]
Doc = Annotated[dict[str, Any], Body()]


# ---- delivery --------------------------------------------------------------------------------
@router.post("/v1/triggers/{name}", responses=responses(401, 413))
async def deliver_alert(name: Name, request: Request) -> dict[str, Any]:
    """An alert notification for trigger ``name``, with its token (Bearer, or Basic with the
    token as the password). 400 and nothing started for a body that is not a clean alert."""
    automation = _automation(request)
    trigger = await asyncio.to_thread(
        automation.triggers.authenticate, name, request.headers.get("authorization")
    )
    return await automation.triggers.receive(trigger, await request.body())


# ---- triggers --------------------------------------------------------------------------------
@router.get("/v1/triggers", responses=responses(403))
async def list_triggers(who: Operator) -> dict[str, Any]:
    items = await asyncio.to_thread(who[1].triggers.list)
    return {"items": items, "total": len(items)}


@router.get("/v1/triggers/{name}", responses=responses(403, 404))
async def get_trigger(name: Name, who: Operator) -> dict[str, Any]:
    return await asyncio.to_thread(who[1].triggers.get, name)


@router.put("/v1/triggers/{name}", responses=responses(403))
async def put_trigger(name: Name, doc: Doc, who: Admin, response: Response) -> dict[str, Any]:
    """Create (201, with ``token``: shown this once) or replace the rules (200)."""
    caller, automation = who
    token = await asyncio.to_thread(automation.triggers.put, name, doc, caller.name)
    body = await asyncio.to_thread(automation.triggers.get, name)
    if token is not None:
        response.status_code = 201
        body["token"] = token
    return body


@router.post("/v1/triggers/{name}/token", responses=responses(403, 404))
async def rotate_trigger_token(name: Name, who: Admin) -> dict[str, Any]:
    caller, automation = who
    return {"token": await asyncio.to_thread(automation.triggers.rotate, name, caller.name)}


@router.delete("/v1/triggers/{name}", status_code=204, responses=responses(403, 404))
async def delete_trigger(name: Name, who: Admin) -> Response:
    caller, automation = who
    await asyncio.to_thread(automation.triggers.delete, name, caller.name)
    return Response(status_code=204)


# ---- schedules -------------------------------------------------------------------------------
@router.get("/v1/schedules", responses=responses(403))
async def list_schedules(who: Operator) -> dict[str, Any]:
    items = await asyncio.to_thread(who[1].schedules.list)
    return {"items": items, "total": len(items)}


@router.get("/v1/schedules/{name}", responses=responses(403, 404))
async def get_schedule(name: Name, who: Operator) -> dict[str, Any]:
    return await asyncio.to_thread(who[1].schedules.get, name)


@router.put("/v1/schedules/{name}", responses=responses(403, 404))
async def put_schedule(name: Name, doc: Doc, who: Admin, response: Response) -> dict[str, Any]:
    """Create (201) or replace (200); its next firing counts from now."""
    caller, automation = who
    created = await asyncio.to_thread(automation.schedules.put, name, doc, caller.name)
    response.status_code = 201 if created else 200
    return await asyncio.to_thread(automation.schedules.get, name)


@router.delete("/v1/schedules/{name}", status_code=204, responses=responses(403, 404))
async def delete_schedule(name: Name, who: Admin) -> Response:
    caller, automation = who
    await asyncio.to_thread(automation.schedules.delete, name, caller.name)
    return Response(status_code=204)


@router.post("/v1/schedules/{name}/pause", responses=responses(403, 404))
async def pause_schedule(name: Name, who: Admin) -> dict[str, Any]:
    caller, automation = who
    await asyncio.to_thread(automation.schedules.pause, name, caller.name)
    return await asyncio.to_thread(automation.schedules.get, name)


@router.post("/v1/schedules/{name}/resume", responses=responses(403, 404))
async def resume_schedule(name: Name, who: Admin) -> dict[str, Any]:
    caller, automation = who
    await asyncio.to_thread(automation.schedules.resume, name, caller.name)
    return await asyncio.to_thread(automation.schedules.get, name)


@router.post("/v1/schedules/{name}/run", responses=responses(403, 404, 409))
async def run_schedule_now(name: Name, who: Admin) -> dict[str, Any]:
    """Fire it now, once, whatever its cron says (paused or not)."""
    caller, automation = who
    return await automation.schedules.run_now(name, caller.name)
