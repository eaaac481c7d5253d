"""History: ``/executions`` (every call, filtered and paged with the REST keyset cursor) and
``/audit`` (the chain's entries, paged, filtered, and its "Verify chain" check).

The rules are the REST routes' (``GET /v1/executions``, ``GET /v1/audit``, ``GET
/v1/audit/verify``): any logged-in principal may read them. Verifying walks the whole chain,
so it is a form post (CSRF-checked), never something a link or a prefetch sets off. Pages only
read the store; they must never change a record.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from ongrid_skills.doors.web.forms import CheckedForm
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.execution.records import Status
from ongrid_skills.store.auditverify import Verification

router = APIRouter()

EXECUTIONS_PAGE = 50
#: Running calls of a page whose status is followed live (each is an event stream; browsers
#: open about six connections to one server over HTTP/1.1, and pages need some for themselves).
LIVE_ROWS = 3
AUDIT_PAGE = 50
#: Characters of an audit entry's data shown in the table (its JSON, pretty-printed).
PAYLOAD_CHARS = 4000
Text = Annotated[str | None, Query(max_length=200)]


@dataclass(frozen=True, slots=True)
class ExecutionFilter:
    skill: str | None
    status: str | None
    requested_by: str | None
    host: str | None = None

    def params(self, cursor: str | None = None) -> dict[str, str]:
        values = {
            "skill": self.skill or "",
            "status": self.status or "",
            "requested_by": self.requested_by or "",
            "host": self.host or "",
            "cursor": cursor or "",
        }
        return {k: v for k, v in values.items() if v}

    def filtered(self) -> bool:
        return bool(self.skill or self.status or self.requested_by or self.host)


@router.get("/executions")
async def executions(
    request: Request,
    _session: Session,
    skill: Text = None,
    status: Annotated[str | None, Query(max_length=30)] = None,
    requested_by: Text = None,
    host: Text = None,
    cursor: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    """Newest first, :data:`EXECUTIONS_PAGE` a page; "Next" carries the REST ``next_cursor``."""
    if status and status not in {s.value for s in Status}:
        raise InvalidRequest(f"unknown status {status!r}")
    wanted = ExecutionFilter(skill or None, status or None, requested_by or None, host or None)
    items, next_cursor = manager_of(request).store.executions.page(
        skill=wanted.skill,
        status=wanted.status,
        requested_by=wanted.requested_by,
        host=wanted.host,
        limit=EXECUTIONS_PAGE,
        cursor=cursor or None,
    )
    return render(
        request,
        "executions.html",
        section="executions",
        title="Executions",
        items=items,
        wanted=wanted,
        statuses=[s.value for s in Status],
        next_cursor=next_cursor,
        paged=bool(cursor),
        live_rows=LIVE_ROWS,
    )


@dataclass(frozen=True, slots=True)
class AuditFilter:
    action: str | None
    actor: str | None
    subject: str | None

    def params(self, before: int | None = None) -> dict[str, str]:
        values = {
            "action": self.action or "",
            "actor": self.actor or "",
            "subject": self.subject or "",
            "before": str(before) if before is not None else "",
        }
        return {k: v for k, v in values.items() if v}

    def filtered(self) -> bool:
        return bool(self.action or self.actor or self.subject)


def shown_data(value: Any) -> str:
    """An entry's data as pretty JSON, cut at :data:`PAYLOAD_CHARS` (the REST API has it all)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > PAYLOAD_CHARS:
        return text[:PAYLOAD_CHARS] + f"\n… ({len(text) - PAYLOAD_CHARS} more characters)"
    return text


def audit_page(
    request: Request,
    *,
    action: str | None,
    actor: str | None,
    subject: str | None,
    before: int | None,
    verification: Verification | None = None,
) -> Response:
    wanted = AuditFilter(action or None, actor or None, subject or None)
    # One entry more than shown says whether there is a next page.
    entries = manager_of(request).store.audit.entries(
        limit=AUDIT_PAGE + 1,
        before=before,
        action=wanted.action,
        actor=wanted.actor,
        subject=wanted.subject,
    )
    shown = entries[:AUDIT_PAGE]
    more = len(entries) > AUDIT_PAGE and shown
    return render(
        request,
        "audit.html",
        section="audit",
        title="Audit log",
        entries=[(e, shown_data(e.get("data"))) for e in shown],
        wanted=wanted,
        next_before=shown[-1]["seq"] if more else None,
        paged=before is not None,
        verification=verification,
    )


@router.get("/audit")
async def audit(
    request: Request,
    _session: Session,
    action: Text = None,
    actor: Text = None,
    subject: Text = None,
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> Response:
    """The newest entries first, :data:`AUDIT_PAGE` a page; "Older" goes on before the last."""
    return audit_page(request, action=action, actor=actor, subject=subject, before=before)


@router.post("/audit/verify")
async def audit_verify(request: Request, _session: Session, _form: CheckedForm) -> Response:
    """Walk the chain now (as ``GET /v1/audit/verify``) and show the newest entries with the
    result: intact, or where it breaks."""
    store = manager_of(request).store
    result = await asyncio.to_thread(store.audit.verify)  # reads every entry
    request.app.state.audit_check.record(result)  # the home shows the newest verdict
    return audit_page(
        request, action=None, actor=None, subject=None, before=None, verification=result
    )
