"""The approvals inbox: ``/approvals`` (live), a request's page ``/approvals/{id}`` (the link
approval webhooks send), its card alone, its live stream, and the approve / reject forms.

Deciding is the desk's: a form post calls ``desk.approve`` / ``desk.reject`` with the session's
principal, exactly as ``POST /v1/approvals/{id}/approve`` calls them with the token's, so the
desk refuses here what it refuses there (one's own request, a second signature, a viewer, a
request no longer pending). The pages only leave out the buttons the desk would refuse.

The live stream (``/approvals/events``) is the REST inbox stream (``feeds.approval_inbox``),
each change sent with the request's card rendered for this session. It checks the session
when it opens, and again every :data:`CHECK_SECONDS` without refreshing it: once the session is
over (logout, expiry, a revoked token) the stream says ``end`` and stops.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from jinja2 import Environment
from sse_starlette.sse import EventSourceResponse
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ongrid_skills import feeds
from ongrid_skills.doors.web.approval_cards import Card, card
from ongrid_skills.doors.web.forms import CheckedForm, Form
from ongrid_skills.doors.web.sessions import (
    SESSION_COOKIE,
    Session,
    WebSession,
    manager_of,
    settings_of,
)
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import InvalidRequest, NotFound
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager

router = APIRouter()

#: The longest comment a signer may give (the limit of the REST body, DecisionBody).
MAX_COMMENT_CHARS = 2000
#: Requests each list of the inbox shows at most.
LISTED = 100
#: Decided requests shown under the pending ones.
RECENTLY_DECIDED = 20
STATUSES = ("pending", "approved", "rejected", "expired", "void", "cancelled")
#: Seconds between the stream's checks of the session (and of expiries) while nothing happens.
CHECK_SECONDS = 5.0
#: Seconds between the comment lines that keep an idle stream open through proxies.
HEARTBEAT_SECONDS = 15.0
#: What a form post leads to, by its ``done`` value.
NOTICES = {
    "signed": "Your signature is recorded; the request waits for more.",
    "approved": "Approved: the call runs now.",
    "rejected": "Rejected: the call will not run.",
}
#: A form posted from a chat's approval card comes back to that chat.
CHAT_NEXT = re.compile(r"chat:([0-9a-f]{1,64})")
ApprovalId = Annotated[str, Path(min_length=1, max_length=64)]


@router.get("/approvals")
async def inbox(
    request: Request,
    session: Session,
    status: Annotated[str | None, Query(max_length=20)] = None,
    done: Annotated[str | None, Query(max_length=20)] = None,
) -> Response:
    """The pending requests (oldest first: the nearest to expiry on top) and the latest decided;
    with ``status``, the latest requests of that status only."""
    manager = manager_of(request)
    manager.desk.expire_due()
    store = manager.store.approvals
    if status:
        if status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}")
        pending, decided = [], store.query(status=status, limit=LISTED)
        if status == "pending":
            pending, decided = list(reversed(decided)), []
    else:
        pending = list(reversed(store.query(status="pending", limit=LISTED)))
        latest = store.query(limit=LISTED + RECENTLY_DECIDED)
        decided = [a for a in latest if a.status != "pending"][:RECENTLY_DECIDED]
    viewer = session.principal
    return render(
        request,
        "approvals.html",
        section="approvals",
        title="Approvals",
        pending=[card(manager, a, viewer) for a in pending],
        decided=[card(manager, a, viewer) for a in decided],
        wanted=status,
        statuses=STATUSES,
        back="inbox",
        notice=NOTICES.get(done or ""),
    )


@router.get("/approvals/events")
async def inbox_events(
    request: Request,
    session: Session,
    only: Annotated[str | None, Query(max_length=64)] = None,
) -> EventSourceResponse:
    """The inbox, live: each request as it is asked, signed and closed, with its card."""
    return EventSourceResponse(_stream(request, session, only), ping=HEARTBEAT_SECONDS)


@router.get("/approvals/{approval_id}")
async def approval_page(
    request: Request,
    approval_id: ApprovalId,
    session: Session,
    done: Annotated[str | None, Query(max_length=20)] = None,
) -> Response:
    manager = manager_of(request)
    shown = card(manager, manager.desk.get(approval_id), session.principal)
    return render(
        request,
        "approval.html",
        section="approvals",
        title=f"Approval {approval_id[:8]} · {shown.approval.skill}",
        card=shown,
        back="page",
        notice=NOTICES.get(done or ""),
    )


@router.get("/approvals/{approval_id}/card")
async def approval_card(
    request: Request,
    approval_id: ApprovalId,
    session: Session,
    back: Annotated[str, Query(pattern="^(inbox|page)$")] = "inbox",
) -> Response:
    """The request's card alone (HTML), as the live inbox shows it: what a page script asks
    for when it may have missed a change (the stream broke meanwhile)."""
    manager = manager_of(request)
    shown = card(manager, manager.desk.get(approval_id), session.principal)
    return HTMLResponse(
        card_html(request.app.state.templates, session, shown, back),
        headers={"cache-control": "no-store"},
    )


@router.post("/approvals/{approval_id}/approve")
async def approve(
    request: Request, approval_id: ApprovalId, session: Session, form: CheckedForm
) -> Response:
    desk = manager_of(request).desk
    approval = await desk.approve(approval_id, session.principal, comment_of(form))
    return _back(form, approval.id, "approved" if approval.status == "approved" else "signed")


@router.post("/approvals/{approval_id}/reject")
async def reject(
    request: Request, approval_id: ApprovalId, session: Session, form: CheckedForm
) -> Response:
    desk = manager_of(request).desk
    approval = await desk.reject(approval_id, session.principal, comment_of(form))
    return _back(form, approval.id, "rejected")


def comment_of(form: Form) -> str | None:
    """The signer's comment (None when blank); InvalidRequest when it is too long."""
    comment = (form.get("comment") or "").strip()
    if len(comment) > MAX_COMMENT_CHARS:
        raise InvalidRequest(f"the comment is over {MAX_COMMENT_CHARS} characters")
    return comment or None


def _back(form: Form, approval_id: str, done: str) -> Response:
    """Back to where the form was: the inbox, a chat (``chat:<run id>``, its card), or the
    request's page (the default)."""
    chat = CHAT_NEXT.fullmatch(form.get("next") or "")
    if chat is not None:
        target = f"/chat/{chat.group(1)}#approval-{approval_id}"
    elif form.get("next") == "inbox":
        target = f"/approvals?done={done}#approval-{approval_id}"
    else:
        target = f"/approvals/{approval_id}?done={done}"
    return RedirectResponse(target, status_code=303)


def card_html(env: Environment, session: WebSession, shown: Card, back: str) -> str:
    """One card, rendered for ``session`` (its buttons, its CSRF token)."""
    template = env.get_template("_approval_card.html")
    return template.render(me=session, csrf=session.csrf, card=shown, back=back)


async def _stream(
    request: Request, session: WebSession, only: str | None
) -> AsyncIterator[dict[str, Any]]:
    manager = manager_of(request)
    env: Environment = request.app.state.templates
    session_id = request.cookies.get(SESSION_COOKIE, "")
    idle = settings_of(request).web_session_idle_seconds
    current = {"session": session}

    def still_open() -> bool:
        """Whether the session still stands; its principal as it is now (a new role shows)."""
        info = manager.store.sessions.find(session_id, idle=idle, touch=False)
        if info is None:
            return False
        current["session"] = WebSession(info, Principal(info.name, info.role), session.csrf)
        return True

    back = "page" if only else "inbox"
    async for kind, body in feeds.approval_inbox(
        manager, still_open=still_open, check_every=CHECK_SECONDS
    ):
        if kind == "ready":
            yield {"event": "ready", "data": json.dumps(body)}
            continue
        if only is not None and body["id"] != only:
            continue
        html = _fresh_card(manager, env, current["session"], body["id"], back)
        if html is None:
            continue
        yield {"event": kind, "data": json.dumps({"approval": body, "html": html})}
    if not still_open():
        yield {"event": "end", "data": json.dumps({"reason": "the session has ended"})}
    # Else the feed dropped this stream (it fell too far behind): the browser reconnects.


def _fresh_card(
    manager: Manager, env: Environment, session: WebSession, approval_id: str, back: str
) -> str | None:
    """The request's card as it is now (a later change sends it again)."""
    try:
        approval = manager.desk.get(approval_id)
    except NotFound:
        return None
    return card_html(env, session, card(manager, approval, session.principal), back)
