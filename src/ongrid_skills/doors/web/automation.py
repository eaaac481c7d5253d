"""Triggers and schedules in the console: ``/automation``, one page for both (SPEC §21).

Operators see every trigger (its role, rules and last starts, the path Alertmanager posts to)
and every schedule (cron, time zone, next firing, last outcomes), as ``GET /v1/triggers`` and
``GET /v1/schedules`` show them; admins also get pause, resume and run now for schedules.
Creating and editing stay with the CLI and the REST API (a trigger's token is shown once,
which a page reload would lose): the page says so.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request
from starlette.responses import RedirectResponse, Response

from ongrid_skills.automation import Automation
from ongrid_skills.doors.web.forms import CheckedForm
from ongrid_skills.doors.web.sessions import Session
from ongrid_skills.doors.web.templates import render
from ongrid_skills.governance.gate import has_role, require_role
from ongrid_skills.types import Role

router = APIRouter()
Name = Annotated[str, Path(min_length=1, max_length=64)]


def automation_of(request: Request) -> Automation:
    automation: Automation = request.app.state.automation
    return automation


async def _admin(request: Request, session: Session) -> Automation:
    require_role(session.principal, Role.ADMIN)  # before any form is read
    return automation_of(request)


AdminAutomation = Annotated[Automation, Depends(_admin)]


@router.get("/automation")
async def automation_page(request: Request, session: Session) -> Response:
    require_role(session.principal, Role.OPERATOR)
    automation = automation_of(request)
    triggers = await asyncio.to_thread(automation.triggers.list)
    schedules = await asyncio.to_thread(automation.schedules.list)
    return render(
        request,
        "automation.html",
        section="automation",
        title="Triggers and schedules",
        triggers=triggers,
        schedules=schedules,
        admin=has_role(session.principal, Role.ADMIN),
    )


@router.post("/automation/schedules/{name}/{action}")
async def schedule_action(
    name: Name,
    action: Literal["pause", "resume", "run"],
    session: Session,
    automation: AdminAutomation,
    _form: CheckedForm,
) -> Response:
    actor = session.principal.name
    if action == "run":
        await automation.schedules.run_now(name, actor)
    else:
        change = automation.schedules.pause if action == "pause" else automation.schedules.resume
        await asyncio.to_thread(change, name, actor)
    return RedirectResponse("/automation", status_code=303)
