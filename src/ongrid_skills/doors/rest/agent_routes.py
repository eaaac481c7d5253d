"""REST doors of the agent kernel (SPEC §8-9): start runs, read them, follow their events.

``POST /v1/agent/runs`` starts a run as the caller (its role applies to every tool call, with the
persona's mode: the stricter wins); ``GET /v1/agent/runs/{id}`` is the run with its transcript;
``GET /v1/agent/runs/{id}/events`` is a Server-Sent Events stream of its timeline (replay, then
live events until ``done``). Runs waiting for an approval when the server stops resume at the
next start (see the router's lifespan).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from sse_starlette.sse import EventSourceResponse

from ongrid_skills.agent import AgentService, RunStatus
from ongrid_skills.doors.rest.auth import request_principal
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.doors.rest.routes import SSE_ANSWER, sse_message
from ongrid_skills.errors import Conflict, Forbidden, InvalidRequest
from ongrid_skills.governance.gate import may_cancel
from ongrid_skills.governance.principal import Principal


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Runs inside the app's own lifespan: the manager is up; stops before it closes."""
    service = AgentService(app.state.manager, resumable=True)
    app.state.agents = service
    await service.recover()
    try:
        yield
    finally:
        await service.close()


router = APIRouter(lifespan=lifespan)
Caller = Annotated[Principal, Depends(request_principal)]


async def agents_of(request: Request) -> AgentService:
    """The app's agent service (a dependency; async so it runs on the loop, not in a thread)."""
    service: AgentService = request.app.state.agents
    return service


Agents = Annotated[AgentService, Depends(agents_of)]


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    persona: str = Field(default="default", max_length=128, description="Whose profile.")
    message: str = Field(min_length=1, max_length=100_000, description="The user's message.")
    wait: StrictBool = Field(default=False, description="Answer when the run has ended.")
    model: str | None = Field(
        default=None, max_length=200, description="Else the persona's, else ONGRID_LLM_MODEL."
    )


def _json(body: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(body, ensure_ascii=False), status_code=status, media_type="application/json"
    )


@router.post(
    "/v1/agent/runs",
    status_code=202,
    responses={200: {"description": "wait=true"}, **responses(403, 404)},
)
async def start_run(body: RunBody, agents: Agents, caller: Caller) -> Response:
    if not body.message.strip():
        raise InvalidRequest("message must not be blank")
    run = agents.create(body.persona, caller, model=body.model)
    task = agents.start(run, body.message)
    if body.wait:
        await asyncio.shield(task)  # a client that goes away does not stop the run
        return _json(agents.body(run.id))
    return _json({"id": run.id, "status": run.record.status.value}, 202)


@router.get("/v1/agent/runs", responses=responses())
async def list_runs(
    agents: Agents,
    _caller: Caller,
    status: Annotated[
        str | None, Query(json_schema_extra={"enum": [s.value for s in RunStatus]})
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> Response:
    if status is not None and status not in {s.value for s in RunStatus}:
        raise InvalidRequest(f"unknown status {status!r}")
    items = [r.to_dict() for r in agents.runs.page(status=status, limit=limit)]
    return _json({"items": items, "total": len(items)})


@router.get("/v1/agent/runs/{run_id}", responses=responses(404))
async def get_run(run_id: str, agents: Agents, _caller: Caller) -> Response:
    return _json(agents.body(run_id))


@router.post("/v1/agent/runs/{run_id}/cancel", responses=responses(403, 404, 409))
async def cancel_run(run_id: str, agents: Agents, caller: Caller) -> Response:
    """Stop a run that is going (its calls waiting for approval are withdrawn)."""
    record = agents.get(run_id)
    if not may_cancel(caller, record.requested_by):
        raise Forbidden("only the requester or an operator may cancel this run")
    task = agents.tasks.get(run_id)
    run = agents.live.get(run_id)
    if record.status.final:
        raise Conflict(f"agent run {run_id} is {record.status.value}")
    if task is None or run is None:
        raise Conflict(f"agent run {run_id} is not going in this server")
    run.cancel_requested = True
    task.cancel()
    await asyncio.wait({task}, timeout=10)
    return _json(agents.body(run_id))


@router.get(
    "/v1/agent/runs/{run_id}/events",
    response_class=EventSourceResponse,
    responses={**SSE_ANSWER, **responses(404)},
)
async def run_events(run_id: str, agents: Agents, _caller: Caller) -> EventSourceResponse:
    """The timeline so far, then live events until ``done``."""
    agents.get(run_id)
    return EventSourceResponse(_stream(agents, run_id))


async def _stream(agents: AgentService, run_id: str) -> AsyncIterator[dict[str, Any]]:
    timeline = agents.timeline(run_id)
    if timeline is None:
        for seq, event in agents.runs.events(run_id):
            yield sse_message(seq, event)
        return
    async for seq, event in timeline.follow():
        yield sse_message(seq, event)
