"""REST doors of the agent kernel (SPEC §8-9): start runs, read them, follow their events.

``POST /v1/agent/runs`` starts a run as the caller (its role applies to every tool call, with the
persona's mode: the stricter wins); ``GET /v1/agent/runs/{id}`` is the run with its transcript;
``GET /v1/agent/runs/{id}/events`` is a Server-Sent Events stream of its typed events
(``AgentService.follow``: replay, then live events until ``done``, text deltas included). The
service is the app's (``app.state.agents``, opened beside the manager in the shared lifespan);
this door only maps HTTP to it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from sse_starlette.sse import EventSourceResponse

from ongrid_skills.agent import AgentService, RunStatus, to_event
from ongrid_skills.doors.rest.auth import request_principal
from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.doors.rest.routes import SSE_ANSWER, sse_message
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.governance.principal import Principal

router = APIRouter()
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
    run = agents.start(body.persona, caller, body.message, model=body.model)
    if body.wait:
        await agents.finished(run.id)  # a client that goes away does not stop the run
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
    await agents.cancel(run_id, caller)
    return _json(agents.body(run_id))


@router.get(
    "/v1/agent/runs/{run_id}/events",
    response_class=EventSourceResponse,
    responses={**SSE_ANSWER, **responses(404)},
)
async def run_events(run_id: str, agents: Agents, _caller: Caller) -> EventSourceResponse:
    """The timeline so far, then live events until ``done`` (``text_delta`` included)."""
    agents.get(run_id)
    return EventSourceResponse(_stream(agents, run_id))


async def _stream(agents: AgentService, run_id: str) -> AsyncIterator[dict[str, Any]]:
    async for seq, event in agents.follow(run_id):
        yield sse_message(seq, to_event(event))
