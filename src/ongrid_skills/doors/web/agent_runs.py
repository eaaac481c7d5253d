"""Agent runs: ``/agent/runs`` (newest first, by status) and a run's page with its transcript.

The rules of ``GET /v1/agent/runs`` and ``GET /v1/agent/runs/{id}``: any logged-in principal
may read them. Runs and transcripts are asked of the app's agent service (``state.agents``, the
one REST asks), which reads them from the store, so a run driven by another replica reads the
same. The transcript is shown as stored: each user message,
each model reply with the tool calls it asked for (their arguments as the model wrote them), each
tool result exactly as the model received it, and each call that waits for an approval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from ongrid_skills.agent import AgentService
from ongrid_skills.agent.runs import RunStatus, StoredMessage
from ongrid_skills.doors.web.sessions import Session
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import InvalidRequest

router = APIRouter()


def agents_of(request: Request) -> AgentService:
    """The served app's agent service (opened beside the manager in the shared lifespan)."""
    agents: AgentService = request.app.state.agents
    return agents


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call a model asked for: its name and arguments (pretty when they are JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One transcript entry, ready for the page."""

    seq: int
    role: str
    ts: float
    content: dict[str, Any]
    calls: list[Call]


def readable(arguments: str) -> str:
    """A model's arguments text, indented when it is JSON, else as written."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return arguments


def entry(message: StoredMessage) -> Entry:
    calls = [
        Call(str(c.get("id", "")), str(c.get("name", "")), readable(str(c.get("arguments", ""))))
        for c in message.content.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    return Entry(message.seq, message.role, message.created_at, message.content, calls)


@router.get("/agent/runs")
async def agent_runs(
    request: Request,
    _session: Session,
    status: Annotated[str | None, Query(max_length=30)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> Response:
    if status and status not in {s.value for s in RunStatus}:
        raise InvalidRequest(f"unknown status {status!r}")
    runs = agents_of(request).runs.page(status=status or None, limit=limit)
    return render(
        request,
        "agent_runs.html",
        section="agent",
        title="Agent runs",
        runs=runs,
        wanted=status or "",
        statuses=[s.value for s in RunStatus],
        limit=limit,
    )


@router.get("/agent/runs/{run_id}")
async def agent_run(request: Request, run_id: str, _session: Session) -> Response:
    agents = agents_of(request)
    record = agents.get(run_id)  # NotFound for an unknown run
    return render(
        request,
        "agent_run.html",
        section="agent",
        title=f"Agent run {run_id[:8]}",
        run=record,
        entries=[entry(m) for m in agents.runs.messages(run_id)],
        children=agents.runs.children(run_id),
    )
