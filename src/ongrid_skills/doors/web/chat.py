"""The chat (SPEC §19): talk to the agent as a persona, watch its tool calls live, confirm its
calls on inline approval cards.

``/chat`` starts a conversation (a persona the principal may use: the gate's ``persona_usable``,
so a viewer picks among read-only personas) and lists one's own runs; ``/chat/{id}`` is one run
with its whole transcript, a Stop button while it goes (the gate's ``may_cancel``) and, once it
has ended, a form to continue it (its requester only). Everything goes through the app's agent
service (``state.agents``), the one REST and the terminal use: ``start``, ``send``, ``cancel``,
``follow``. ``/chat/{id}/events`` is the run's typed events as Server-Sent Events (the REST
stream's, from the start or after ``Last-Event-ID``), then ``end`` with the run;
``static/js/parts/chat-live.js`` draws them as text. A call that waits for an approval shows a
card (``/chat/{id}/approvals/{approval_id}``, rendered for the viewer): its forms post to the
inbox's own routes (``approvals.py``: the desk decides), which come back here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from sse_starlette.sse import EventSourceResponse
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ongrid_skills.agent import AgentService, to_event
from ongrid_skills.doors.web.agent_runs import agents_of
from ongrid_skills.doors.web.chat_view import (
    ChatHome,
    approval_ids,
    asked_by,
    chat_card,
    conversation,
)
from ongrid_skills.doors.web.forms import CheckedForm, Form
from ongrid_skills.doors.web.live import last_event_id
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import Forbidden, InvalidRequest, NotFound
from ongrid_skills.governance.gate import persona_usable

router = APIRouter()
RunId = Annotated[str, Path(pattern=r"^[0-9a-f]{1,64}$")]
#: The longest message (the REST body's limit).
MAX_MESSAGE_CHARS = 100_000
#: One's own runs the chat lists.
OWN_RUNS = 30
#: Seconds between the comment lines that keep an idle stream open through proxies.
HEARTBEAT_SECONDS = 15.0


def message_of(form: Form) -> str:
    """The posted message; InvalidRequest when blank or too long."""
    message = form.get("message") or ""
    if not message.strip():
        raise InvalidRequest("the message must not be blank")
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidRequest(f"the message is over {MAX_MESSAGE_CHARS} characters")
    return message


@router.get("/chat")
async def chat_home(
    request: Request,
    session: Session,
    persona: Annotated[str | None, Query(max_length=128)] = None,
) -> Response:
    registry = manager_of(request).registry
    role = session.principal.role
    usable = sorted(
        (p for p in registry.personas.values() if persona_usable(p, role)), key=lambda p: p.name
    )
    names = [p.name for p in usable]
    chosen = persona if persona in names else ("default" if "default" in names else "")
    runs = agents_of(request).runs.page(requested_by=session.principal.name, limit=OWN_RUNS)
    page = ChatHome(personas=usable, chosen=chosen or (names[0] if names else ""), runs=runs)
    return render(request, "chat.html", section="chat", title="Chat", page=page)


@router.post("/chat")
async def start_chat(request: Request, session: Session, form: CheckedForm) -> Response:
    """A new run as the chosen persona, with the session's principal (its role applies)."""
    name = form.get("persona") or "default"
    persona = manager_of(request).registry.persona(name)  # NotFound for an unknown one
    if not persona_usable(persona, session.principal.role):
        raise Forbidden(
            f"role {session.principal.role.value} may not use persona {persona.name} "
            f"({persona.permission_mode.value})"
        )
    run = agents_of(request).start(persona.name, session.principal, message_of(form))
    return RedirectResponse(f"/chat/{run.id}", status_code=303)


@router.get("/chat/{run_id}")
async def chat_run(request: Request, run_id: RunId, session: Session) -> Response:
    agents = agents_of(request)
    run = agents.get(run_id)  # NotFound for an unknown run
    parts = [m.part for m in agents.runs.messages(run_id)]
    desk = manager_of(request).desk
    approvals = {}
    for approval_id in approval_ids(parts):
        try:
            approvals[approval_id] = desk.get(approval_id)
        except NotFound:
            continue
    children = agents.runs.children(run_id)
    page = conversation(run, parts, session.principal, approvals, children)
    return render(request, "chat_run.html", section="chat", title=f"Chat {run_id[:8]}", page=page)


@router.post("/chat/{run_id}/send")
async def send(request: Request, run_id: RunId, session: Session, form: CheckedForm) -> Response:
    """Continue an ended run with another message (its requester only: the service says)."""
    agents_of(request).send(run_id, message_of(form), session.principal)
    return RedirectResponse(f"/chat/{run_id}", status_code=303)


@router.post("/chat/{run_id}/stop")
async def stop(request: Request, run_id: RunId, session: Session, _form: CheckedForm) -> Response:
    """Cancel a going run: its requester or an operator (the service asks the gate)."""
    await agents_of(request).cancel(run_id, session.principal)
    return RedirectResponse(f"/chat/{run_id}", status_code=303)


@router.get("/chat/{run_id}/approvals/{approval_id}")
async def chat_card_html(
    request: Request,
    run_id: RunId,
    approval_id: Annotated[str, Path(pattern=r"^[0-9a-f]{1,64}$")],
    session: Session,
) -> Response:
    """One approval card of the run, rendered for the viewer (the page script asks for it when
    a call starts waiting and each time its request changes)."""
    agents = agents_of(request)
    run = agents.get(run_id)
    approval = manager_of(request).desk.get(approval_id)
    if not asked_by(approval, run_id):
        raise NotFound(f"approval {approval_id} was not asked by agent run {run_id}")
    top = run
    while top.parent_run_id is not None:  # a delegated run's card is shown in the top chat
        top = agents.get(top.parent_run_id)
    template = request.app.state.templates.get_template("_chat_card.html")
    card = chat_card(approval, run, session.principal, back=top.id)
    html = template.render(me=session, csrf=session.csrf, card=card)
    return HTMLResponse(html, headers={"cache-control": "no-store"})


@router.get("/chat/{run_id}/events")
async def chat_events(
    request: Request,
    run_id: RunId,
    _session: Session,
    after: Annotated[int, Query(ge=0, le=10**12)] = 0,
    last_event: Annotated[str | None, Header(alias="last-event-id")] = None,
) -> EventSourceResponse:
    """The run's typed events (as ``GET /v1/agent/runs/{id}/events`` sends them), then ``end``
    with the run; a reconnecting browser goes on after the last event it saw."""
    agents = agents_of(request)
    agents.get(run_id)  # NotFound before the stream starts
    start = max(after, last_event_id(last_event))
    return EventSourceResponse(_stream(agents, run_id, start), ping=HEARTBEAT_SECONDS)


async def _stream(agents: AgentService, run_id: str, after: int) -> AsyncIterator[dict[str, Any]]:
    async for seq, event in agents.follow(run_id, after):
        data = json.dumps(to_event(event).to_dict(), ensure_ascii=False)
        yield {"event": event.kind, "id": str(seq), "data": data}
    yield {"event": "end", "data": json.dumps(agents.get(run_id).to_dict(), ensure_ascii=False)}
