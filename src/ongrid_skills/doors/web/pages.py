"""The catalogue pages: ``/skills`` (as cards or as a table: the principal's preference,
``POST /preferences/catalogue-view``), ``/skills/{name}``, and the admin's ``POST /reload``.

The page pattern: a route takes the :data:`~ongrid_skills.doors.web.sessions.Session` (or the
:data:`~ongrid_skills.doors.web.forms.CheckedForm` when it changes something), asks the manager
and the gate exactly what the REST route of the same capability asks, and returns
``render(request, template, section=..., title=..., **data)``. A route never decides a
permission itself and never builds an error page (``errors`` does, from the typed errors).
"""

from __future__ import annotations

import json
import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from markupsafe import Markup
from starlette.responses import RedirectResponse, Response

from ongrid_skills.doors.web.catalogue import VIEWS, CatalogueQuery, catalogue_page
from ongrid_skills.doors.web.credential_views import slot_views
from ongrid_skills.doors.web.forms import CheckedForm, Form
from ongrid_skills.doors.web.hosts import offers_of
from ongrid_skills.doors.web.markdown import render_markdown
from ongrid_skills.doors.web.run import run_blocker
from ongrid_skills.doors.web.sessions import Session, WebSession, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import InvalidRequest, SkillError
from ongrid_skills.governance.gate import has_role, require_role
from ongrid_skills.manager import Manager
from ongrid_skills.skills.bundle import substitute
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.skill_md import read_body
from ongrid_skills.types import Role, SkillClass

router = APIRouter()
RECENT_EXECUTIONS = 20
#: The preference that says how the catalogue is shown (one of ``catalogue.VIEWS``).
VIEW_PREFERENCE = "catalogue.view"
#: The longest query string a view switch carries back to the catalogue.
MAX_BACK_CHARS = 2000


def catalogue_view(manager: Manager, session: WebSession) -> str:
    """How this principal wants the catalogue: what they chose last, else cards."""
    chosen = manager.store.preferences.get(session.principal.name, VIEW_PREFERENCE)
    return chosen if chosen in VIEWS else VIEWS[0]


@router.get("/skills")
async def catalogue(
    request: Request,
    session: Session,
    q: Annotated[str | None, Query(max_length=200)] = None,
    skill_class: Annotated[str | None, Query(alias="class", max_length=20)] = None,
    source: Annotated[str | None, Query(max_length=200)] = None,
    category: Annotated[str | None, Query(max_length=200)] = None,
    persona: Annotated[str | None, Query(max_length=200)] = None,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    tools: bool = False,
    reloaded: Annotated[int | None, Query(ge=0)] = None,
    refused: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    manager = manager_of(request)
    query = CatalogueQuery.parse(q, skill_class, source, category, persona, page, tools)
    view = catalogue_page(manager.registry, query)
    shown_as = catalogue_view(manager, session)
    last_runs = (
        manager.store.executions.newest_of(s.name for s in view.skills)
        if shown_as == "table"
        else {}
    )
    return render(
        request,
        "catalogue.html",
        section="catalogue",
        title="Catalogue",
        view=view,
        shown_as=shown_as,
        views=VIEWS,
        last_runs=last_runs,
        now=time.time(),
        classes=[c.value for c in SkillClass],
        may_reload=has_role(session.principal, Role.ADMIN),
        reloaded=reloaded,
        refused=refused,
    )


@router.post("/preferences/catalogue-view")
async def choose_catalogue_view(request: Request, session: Session, form: CheckedForm) -> Response:
    """Remember how this principal wants the catalogue, then show it so (same query)."""
    chosen = _field(form, "view")
    if chosen not in VIEWS:
        raise InvalidRequest(f"view must be one of {', '.join(VIEWS)}")
    back = _field(form, "back")
    if len(back) > MAX_BACK_CHARS:
        raise InvalidRequest(f"back is over {MAX_BACK_CHARS} characters")
    manager_of(request).store.preferences.set(session.principal.name, VIEW_PREFERENCE, chosen)
    # Only a query string comes back: the path is ours, so this never leaves the catalogue.
    return RedirectResponse("/skills" + (f"?{back}" if back else ""), status_code=303)


def _field(form: Form, name: str) -> str:
    return form.get(name) or ""


@router.get("/skills/{name}")
async def skill_page(request: Request, name: str, session: Session) -> Response:
    manager = manager_of(request)
    skill = manager.registry.resolve(name)
    executions, _cursor = manager.store.executions.page(skill=skill.name, limit=RECENT_EXECUTIONS)
    admin = has_role(session.principal, Role.ADMIN)
    slots = slot_views(skill, manager.credentials.bindings(fresh=True)) if skill.credentials else []
    names = [c.name for c in manager.credentials.all()] if slots and admin else []
    return render(
        request,
        "skill.html",
        section="catalogue",
        title=skill.name,
        skill=skill,
        schema=json.dumps(skill.schema, indent=2, ensure_ascii=False, sort_keys=False),
        extra=json.dumps(skill.extra, indent=2, ensure_ascii=False, default=str)
        if skill.extra
        else None,
        executions=executions,
        run_blocker=run_blocker(skill, session),
        offers=offers_of(manager, skill),
        slots=slots,
        credential_names=names,
        may_bind=admin,
        instructions=instructions_of(skill),
    )


def instructions_of(skill: Skill) -> Markup | str | None:
    """The body of the SKILL.md a skill comes from, rendered safely (what ``read_skill`` gives a
    model); None for a skill.json skill; a sentence when the file cannot be read now."""
    if skill.kind != "instructions" and skill.group is None:
        return None
    try:
        body = read_body(skill)
    except SkillError as exc:
        return f"The instructions cannot be read now: {exc}"
    return render_markdown(substitute(body, skill.base_dir) if skill.base_dir else body)


@router.post("/reload")
async def reload(request: Request, session: Session, _form: CheckedForm) -> Response:
    """Re-scan the skill dirs now: the rule of ``POST /v1/reload`` (admin)."""
    require_role(session.principal, Role.ADMIN)
    registry = await manager_of(request).reload(session.principal.name)
    refused = len(registry.report.errors)
    return RedirectResponse(f"/skills?reloaded={len(registry)}&refused={refused}", status_code=303)
