"""An execution's page: ``GET /executions/{id}``, its cancel button and its raw result.

The page is complete when it is served: the call's facts (who asked, persona, approval, times),
its timeline so far (stderr lines with their times, progress, status changes), and once it has
ended the result (the verbatim bytes, and pretty-printed JSON) or the error envelope. The live
part (``static/js/parts/execution-live.js``) then follows the event stream of
:mod:`~ongrid_skills.doors.web.live` after the last event the page shows, so a reload replays
the timeline and keeps following; at ``end`` it fetches the page again for the outcome.

Cancelling is ``manager.cancel`` with the session's principal, the rule of
``POST /v1/executions/{id}/cancel``. This module decides no permission and never runs a call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from ongrid_skills import feeds
from ongrid_skills.doors.web.again import again_of
from ongrid_skills.doors.web.forms import CheckedForm
from ongrid_skills.doors.web.run import run_blocker
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.execution.records import Event, Execution, Status, iso
from ongrid_skills.governance.gate import may_cancel

router = APIRouter()
#: Events the page itself lists; a longer timeline shows its last ones (the stream has all).
EVENTS_SHOWN = 5000
#: Result bytes the page shows inline; a larger result is cut there (the download has it all).
RESULT_SHOWN = 512 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    """One timeline entry as the page lists it."""

    seq: int
    type: str
    ts: str
    text: str


def line_of(seq: int, event: Event) -> Line:
    """The text of one event (the live part words them alike, in ``execution-live.js``)."""
    data = event.data
    if event.type == "stderr":
        text = str(data.get("line", "")) + (" [line cut]" if data.get("truncated") else "")
    elif event.type == "progress":
        text = progress_text(data)
    elif event.type == "status":
        text = str(data.get("status", "")).replace("_", " ")
        if data.get("reason"):
            text += f": {data['reason']}"
    elif event.type == "stderr_truncated":
        text = f"stderr over its budget after {data.get('after_bytes')} bytes: the rest is not kept"
    elif event.type == "approval_pending":
        text = f"waiting for {data.get('signatures_required')} signature(s)"
    else:
        text = json.dumps(data, ensure_ascii=False)
    return Line(seq, event.type, iso(event.ts) or "", text)


def progress_text(data: dict[str, Any]) -> str:
    done = data.get("progress")
    total = data.get("total")
    text = f"{done} / {total}" if total is not None else f"{done}"
    return f"{text} {data['message']}" if data.get("message") else text


def pretty(text: str | None) -> str | None:
    """``text`` re-indented when it is JSON (and small enough to show), else None."""
    if text is None or len(text) > RESULT_SHOWN:
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


@dataclass(slots=True)
class Timeline:
    """The page's view of the events so far: the lines shown, the last number, the progress."""

    lines: list[Line]
    last: int = 0
    progress: dict[str, Any] | None = None
    #: When the ``running`` status came: a running call's row has no start time yet.
    started: float | None = None

    @property
    def cut(self) -> int:
        """Events before the first line shown."""
        return self.last - len(self.lines) if self.lines else 0


async def timeline_of(request: Request, execution_id: str) -> Timeline:
    """The events so far, as lines (the last :data:`EVENTS_SHOWN`), and the last progress."""
    timeline = Timeline([])
    async for seq, event in feeds.execution_events(manager_of(request), execution_id, follow=False):
        timeline.lines.append(line_of(seq, event))
        timeline.last = seq
        if event.type == "status" and event.data.get("status") == "running":
            timeline.started = timeline.started or event.ts
        if event.type == "progress":
            total = event.data.get("total")
            timeline.progress = {
                "value": event.data.get("progress"),
                "max": total if total else None,
                "text": timeline.lines[-1].text,
            }
    del timeline.lines[:-EVENTS_SHOWN]
    return timeline


@router.get("/executions/{execution_id}")
async def execution_page(request: Request, execution_id: str, session: Session) -> Response:
    manager = manager_of(request)
    execution = manager.get(execution_id)
    # Read before the events: a call that ends meanwhile shows as running, with the events
    # read so far, and the live part gets the rest and the outcome from the stream. (Read
    # after, a final row could show beside a timeline that lacks its last events.)
    timeline = await timeline_of(request, execution.id)
    approval = manager.store.approvals.get(execution.approval_id) if execution.approval_id else None
    skill = manager.registry.lookup(execution.skill)
    again = None
    if skill is not None and skill.kind != "instructions":
        # The address this browser reached the server at: the one its person can reach.
        again = again_of(
            str(request.base_url), execution.id, skill, execution.args, execution.persona
        )
    return render(
        request,
        "execution.html",
        section="executions",
        title=f"{execution.skill} · {execution.status.value.replace('_', ' ')}",
        execution=execution,
        args_pretty=json.dumps(execution.args, indent=2, ensure_ascii=False),
        skill=skill,
        again=again,
        may_run_again=skill is not None and run_blocker(skill, session) is None,
        timeline=timeline,
        approval=approval,
        may_cancel=not execution.status.final
        and may_cancel(session.principal, execution.requested_by),
        outcome=_outcome(execution),
    )


def _outcome(execution: Execution) -> dict[str, Any]:
    """What the page shows once the call has ended: the result, or the error envelope."""
    if not execution.status.final:
        return {}
    if execution.status is Status.SUCCEEDED and execution.result_text is not None:
        raw = execution.result_text
        return {
            "raw": raw[:RESULT_SHOWN],
            "raw_cut": len(raw) > RESULT_SHOWN,
            "size": len(raw.encode()),
            "pretty": pretty(raw),
        }
    return {"envelope": pretty(execution.envelope()) or execution.envelope()}


@router.get("/executions/{execution_id}/result")
async def execution_result(request: Request, execution_id: str, _session: Session) -> Response:
    """The result's bytes exactly as the skill wrote them, as a download."""
    execution = manager_of(request).get(execution_id)
    if execution.result_text is None:
        return Response("no result\n", status_code=404, media_type="text/plain")
    return Response(
        execution.result_text,
        media_type="application/json",
        headers={
            "content-disposition": f'attachment; filename="{execution.id}.json"',
            "cache-control": "no-store",
        },
    )


@router.post("/executions/{execution_id}/cancel")
async def cancel(
    request: Request, execution_id: str, session: Session, _form: CheckedForm
) -> Response:
    """Cancel a running or pending call: the rule of ``POST /v1/executions/{id}/cancel``."""
    execution = await manager_of(request).cancel(execution_id, session.principal)
    return RedirectResponse(f"/executions/{execution.id}", status_code=303)
