"""The REST routes of SPEC §9 (skills, executions, approvals, personas, audit, admin).

Routes translate HTTP into calls of the manager and its desk and back. They must never answer a
permission question themselves (:mod:`ongrid_skills.governance.gate` does) nor build an error
response (:mod:`ongrid_skills.doors.rest.errors` does). A route's docstring is its description in
the OpenAPI document.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse

from ongrid_skills import feeds, toolspec
from ongrid_skills.doors.rest.auth import request_principal
from ongrid_skills.doors.rest.bodies import DecisionBody, ExecuteBody
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.doors.rest.persona_routes import persona_body
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.execution.records import Event, Execution, Status
from ongrid_skills.governance.gate import offered, require_role
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.discovery import LOAD_CODES
from ongrid_skills.types import Role, SkillClass

router = APIRouter()
Caller = Annotated[Principal, Depends(request_principal)]
#: ``?id_prefix=``: the objects whose id starts with these hex digits (how the CLI resolves a
#: short id without listing everything).
IdPrefix = Annotated[
    str | None,
    Query(
        pattern="^[0-9a-fA-F]{1,32}$",
        description="Only the objects whose id starts with these hex digits.",
    ),
]


async def manager_of(request: Request) -> Manager:
    """The app's Manager (a dependency; async so it runs on the loop, not in a thread)."""
    manager: Manager = request.app.state.manager
    return manager


Mgr = Annotated[Manager, Depends(manager_of)]


# ---- health -------------------------------------------------------------------------------
@router.get("/v1/health", responses=responses(public=True))
async def health(manager: Mgr) -> dict[str, Any]:
    registry = manager.registry
    return {
        "status": "ok",
        "skills": len(registry),
        "personas": len(registry.personas),
        "running": manager.running,
        "queued": manager.waiting,
        "loader_errors": len(registry.report.errors),
    }


# ---- skills -------------------------------------------------------------------------------
@router.get("/v1/skills", responses=responses(404))
async def list_skills(
    manager: Mgr,
    _caller: Caller,
    category: str | None = None,
    skill_class: Annotated[
        str | None, Query(alias="class", json_schema_extra={"enum": [c.value for c in SkillClass]})
    ] = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    persona: str | None = None,
) -> Response:
    registry = manager.registry
    try:
        wanted = SkillClass(skill_class) if skill_class else None
    except ValueError:
        raise InvalidRequest("class must be safe, mutating or dangerous") from None
    who = registry.persona(persona) if persona else None
    items = registry.list(
        category=category or None,
        skill_class=wanted,
        query=q,
        keep=(lambda s: offered(s, who)) if who else None,
    )
    fragments = ", ".join(registry.summary_json(s) for s in items)
    text = f'{{"items": [{fragments}], "total": {len(items)}}}'
    return Response(text, media_type="application/json")


@router.get("/v1/skills/{name}", responses=responses(404))
async def get_skill(name: str, manager: Mgr, _caller: Caller) -> Response:
    """The SkillSummary, plus ``extra``: unknown SKILL.md keys kept for humans (or null)."""
    skill = manager.registry.get(name)
    body = {**skill.summary(), "extra": skill.extra}
    return Response(
        json.dumps(body, ensure_ascii=False, default=str), media_type="application/json"
    )


@router.post(
    "/v1/skills/{name}/execute",
    responses={202: {"description": "pending or running"}, **responses(403, 404, 409, 429)},
)
async def execute_skill(
    name: str,
    body: ExecuteBody,
    manager: Mgr,
    caller: Caller,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    execution = await manager.submit(
        name,
        body.call_args,
        principal=caller,
        persona=body.persona,
        confirm=body.confirm,
        wait=body.wait,
        idempotency_key=idempotency_key,
    )
    return execution_response(execution)


def execution_response(execution: Execution, always_ok: bool = False) -> Response:
    """The Execution as JSON with its result verbatim; 202 while it is not final (execute)."""
    status = 200 if always_ok or execution.status.final else 202
    return Response(execution.to_json(), status_code=status, media_type="application/json")


# ---- executions ---------------------------------------------------------------------------
@router.get("/v1/executions", responses=responses())
async def list_executions(
    manager: Mgr,
    _caller: Caller,
    skill: str | None = None,
    status: Annotated[
        str | None, Query(json_schema_extra={"enum": [s.value for s in Status]})
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=300)] = None,
    id_prefix: IdPrefix = None,
    requested_by: Annotated[
        str | None, Query(max_length=128, description="Only the calls this principal asked for.")
    ] = None,
    host: Annotated[
        str | None, Query(max_length=128, description="Only the calls handed to this edge worker.")
    ] = None,
) -> Response:
    if status is not None and status not in {s.value for s in Status}:
        raise InvalidRequest(f"unknown status {status!r}")
    items, next_cursor = manager.store.executions.page(
        skill=skill,
        status=status,
        limit=limit,
        cursor=cursor,
        id_prefix=id_prefix,
        requested_by=requested_by,
        host=host,
    )
    # Results are spliced in verbatim (Execution.to_json): never re-serialised, so a deep or
    # big result can neither break nor slow this listing.
    cursor_json = json.dumps(next_cursor)
    text = (
        '{"items": [' + ", ".join(e.to_json() for e in items) + f'], "next_cursor": {cursor_json}}}'
    )
    return Response(text, media_type="application/json")


@router.get("/v1/executions/{execution_id}", responses=responses(404))
async def get_execution(execution_id: str, manager: Mgr, _caller: Caller) -> Response:
    return execution_response(manager.get(execution_id), always_ok=True)


#: The 200 answer of the event streams, for OpenAPI (3.1: the schema describes one event).
SSE_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: the timeline so far, then live events, then `end`",
        "content": {
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "event": {"type": "string"},
                        "id": {"type": "string"},
                        "data": {"type": "string", "description": "JSON text"},
                    },
                    "required": ["event", "data"],
                }
            }
        },
    }
}


@router.get(
    "/v1/executions/{execution_id}/events",
    response_class=EventSourceResponse,
    responses={**SSE_ANSWER, **responses(404)},
)
async def execution_events(
    execution_id: str,
    manager: Mgr,
    _caller: Caller,
    follow: bool = True,
    last_event_id: Annotated[
        int | None,
        Header(
            alias="Last-Event-ID",
            ge=0,
            description="Resume after this event number (what a reconnecting client sends).",
        ),
    ] = None,
) -> EventSourceResponse:
    """The timeline so far, then (``follow``, the default) live events until the end. With
    ``Last-Event-ID: N`` only the events after number N: a client whose stream broke resumes
    where it was, without a line twice."""
    execution = manager.get(execution_id)
    return EventSourceResponse(_stream(manager, execution, follow, last_event_id or 0))


async def _stream(
    manager: Manager, execution: Execution, follow: bool = True, after: int = 0
) -> AsyncIterator[dict[str, Any]]:
    async for seq, event in feeds.execution_events(
        manager, execution.id, follow=follow, after=after
    ):
        yield sse_message(seq, event)
    yield {"event": "end", "data": manager.get(execution.id).to_json()}


def sse_message(seq: int, event: Event) -> dict[str, Any]:
    """One numbered timeline event as a Server-Sent Event (executions and agent runs alike)."""
    return {"event": event.type, "id": str(seq), "data": json.dumps(event.to_dict())}


@router.post("/v1/executions/{execution_id}/cancel", responses=responses(403, 404, 409))
async def cancel_execution(execution_id: str, manager: Mgr, caller: Caller) -> Response:
    return execution_response(await manager.cancel(execution_id, caller), always_ok=True)


# ---- approvals ----------------------------------------------------------------------------
@router.get("/v1/approvals", responses=responses())
async def list_approvals(
    manager: Mgr,
    _caller: Caller,
    status: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    id_prefix: IdPrefix = None,
) -> dict[str, Any]:
    manager.desk.expire_due()
    items = manager.store.approvals.query(status=status, limit=limit, id_prefix=id_prefix)
    return {"items": [a.to_dict() for a in items], "total": len(items)}


@router.get("/v1/approvals/{approval_id}", responses=responses(404))
async def get_approval(approval_id: str, manager: Mgr, _caller: Caller) -> dict[str, Any]:
    return manager.desk.get(approval_id).to_dict()


@router.post("/v1/approvals/{approval_id}/approve", responses=responses(403, 404, 409))
async def approve(
    approval_id: str, manager: Mgr, caller: Caller, body: DecisionBody | None = None
) -> dict[str, Any]:
    comment = body.comment if body else None
    return (await manager.desk.approve(approval_id, caller, comment)).to_dict()


@router.post("/v1/approvals/{approval_id}/reject", responses=responses(403, 404, 409))
async def reject(
    approval_id: str, manager: Mgr, caller: Caller, body: DecisionBody | None = None
) -> dict[str, Any]:
    comment = body.comment if body else None
    return (await manager.desk.reject(approval_id, caller, comment)).to_dict()


# ---- personas -----------------------------------------------------------------------------
@router.get("/v1/personas", responses=responses())
async def list_personas(manager: Mgr, _caller: Caller) -> dict[str, Any]:
    personas = sorted(manager.registry.personas.values(), key=lambda p: p.name)
    return {"items": [p.summary() for p in personas], "total": len(personas)}


@router.get("/v1/personas/{name}", responses=responses(404))
async def get_persona(name: str, manager: Mgr, _caller: Caller) -> dict[str, Any]:
    registry = manager.registry
    return persona_body(registry, registry.persona(name))


@router.get("/v1/personas/{name}/tools", responses=responses(404))
async def persona_tools(
    name: str,
    manager: Mgr,
    _caller: Caller,
    fmt: Annotated[str, Query(alias="format", pattern="^(openai|anthropic|mcp)$")] = "openai",
    message: Annotated[str | None, Query(max_length=4000)] = None,
) -> dict[str, Any]:
    """The tool definitions this persona is offered, in a provider's format."""
    persona = manager.registry.persona(name)
    skills = toolspec.offered(manager.registry, persona, message)
    return {"format": fmt, "tools": toolspec.export_all(skills, fmt), "total": len(skills)}


# ---- audit and admin ----------------------------------------------------------------------
@router.get("/v1/audit", responses=responses())
async def audit(
    manager: Mgr,
    _caller: Caller,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: int | None = None,
    action: str | None = None,
    subject: str | None = None,
    actor: str | None = None,
) -> dict[str, Any]:
    entries = manager.store.audit.entries(
        limit=limit, before=before, action=action, subject=subject, actor=actor
    )
    return {"items": entries, "total": len(entries)}


@router.get("/v1/audit/verify", responses=responses())
async def audit_verify(manager: Mgr, _caller: Caller) -> JSONResponse:
    result = await asyncio.to_thread(manager.store.audit.verify)  # walks the whole chain
    return JSONResponse(result.to_dict())


class SkippedFile(BaseModel):
    """One file or folder the last load skipped."""

    what: str = Field(description="skill.json, SKILL.md, persona or dir")
    kind: str = Field(
        description="parse or build (refused: counted in errors), duplicate (a name already "
        "taken: the first one found wins), dir (a root or folder not walked)"
    )
    code: str = Field(description="why, as a stable word: " + ", ".join(LOAD_CODES))
    path: str = Field(description="as the loader shows it (absolute, or the relative root given)")
    name: str | None = Field(description="the skill or persona name, when the file gave one")
    reason: str
    line: int | None = Field(description="where in the file (refused files only)")
    column: int | None
    field: str | None = Field(description="the manifest field at fault, when known")
    log_line: str = Field(description="the loader line that reported it (SPEC §3)")


class LoaderWarningItem(BaseModel):
    """One warning of the last load: the file loaded (or was knowingly left out)."""

    code: str = Field(description="stable code (docs/skills.md), e.g. unknown_key, hooks_not_run")
    path: str
    name: str | None = Field(description="the skill the file gave, when it gave one")
    key: str | None = Field(description="the frontmatter or manifest key it is about")
    message: str
    log_line: str = Field(description="the loader line that reported it")


class LoaderReport(BaseModel):
    """What the current registry's load skipped, and what it warned about."""

    skills: int = Field(description="skills loaded (as in /v1/health)")
    personas: int = Field(description="personas loaded, the built-in default included")
    errors: int = Field(description="files refused (parse or build), /v1/health's loader_errors")
    items: list[SkippedFile] = Field(description="every skipped file and folder, in load order")
    total: int
    warnings: list[LoaderWarningItem] = Field(description="every warning, in load order")


class ReloadAnswer(BaseModel):
    """What a reload loaded, and every file and folder it skipped, with why."""

    skills: int = Field(description="skills loaded")
    loader_errors: int = Field(description="files refused (parse or build)")
    skipped: list[SkippedFile] = Field(
        description="every skipped file and folder, in load order (as GET /v1/loader lists them)"
    )


@router.post("/v1/reload", response_model=ReloadAnswer, responses=responses(403))
async def reload(manager: Mgr, caller: Caller) -> dict[str, Any]:
    """Re-scan every configured dir now; the answer names each file that did not load, and why
    (the loader lines go to the server's log as well)."""
    require_role(caller, Role.ADMIN)
    registry = await manager.reload(caller.name)
    report = registry.report
    return {
        "skills": len(registry),
        "loader_errors": len(report.errors),
        "skipped": [item.to_dict() for item in report.skipped],
    }


@router.get("/v1/loader", response_model=LoaderReport, responses=responses(403))
async def loader(manager: Mgr, caller: Caller) -> dict[str, Any]:
    """What the last load (start-up or reload) skipped, and why: every refused skill.json,
    SKILL.md and persona file, every duplicate name and every root or folder not walked, with
    its path, reason and loader line; and every warning, with its stable code. Admin only
    (paths and parse errors describe the host)."""
    require_role(caller, Role.ADMIN)
    registry = manager.registry
    report = registry.report
    return {
        "skills": len(registry),
        "personas": len(registry.personas),
        "errors": len(report.errors),
        "items": [item.to_dict() for item in report.skipped],
        "total": len(report.skipped),
        "warnings": [warning.to_dict() for warning in report.warnings],
    }


@router.get("/metrics", response_class=PlainTextResponse, responses=responses())
async def metrics(manager: Mgr, _caller: Caller) -> Response:
    manager.metrics.queued.set(manager.waiting)
    return Response(manager.metrics.render(), media_type="text/plain; version=0.0.4")
