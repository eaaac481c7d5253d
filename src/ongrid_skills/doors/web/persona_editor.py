"""The persona editor (admins): ``/personas/new``, ``/personas/{name}/edit`` and
``/personas/{name}/delete``, for the personas stored at run time (SPEC §19).

The rules are the REST routes' (``/v1/personas``): admins only (anyone else gets the gate's 403
before a form is read), every change through the manager's
:class:`~ongrid_skills.skills.stored_personas.StoredPersonas`, the same validation, audit entry
and ``list_changed``. File and bundled personas are read-only: their pages have no Edit button
and these routes answer 409 for them. The form has one field per frontmatter field and the
Markdown body; *Preview* builds the persona without storing it and shows each refusal beside its
field, or the tools it would be offered now (``toolspec.offered`` over the current registry, the
list a model would be sent). Nothing a user typed is ever rendered as markup (autoescaping).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from starlette.responses import RedirectResponse, Response

from ongrid_skills import toolspec
from ongrid_skills.doors.statuses import STATUS_BY_CODE
from ongrid_skills.doors.web.forms import CheckedForm, Form
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import Conflict, InvalidPersona, InvalidRequest, NotFound, SkillError
from ongrid_skills.governance.gate import require_role
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona_doc import document_of, persona_from_document, source_of
from ongrid_skills.types import PermissionMode, Role

router = APIRouter()
Name = Annotated[str, Path(min_length=1, max_length=64)]
#: The form's text fields, in order (``tools`` and ``disallowed_tools`` are one per line).
TEXT_FIELDS = ("name", "description", "when_to_use", "model", "critical_reminder")
LIST_FIELDS = ("tools", "disallowed_tools")
MODES = tuple(mode.value for mode in PermissionMode)
_SPLIT = re.compile(r"[\s,]+")


async def admin_manager(request: Request, session: Session) -> Manager:
    """The manager, for an admin; the gate's Forbidden otherwise (before any form is read)."""
    require_role(session.principal, Role.ADMIN)
    return manager_of(request)


AdminManager = Annotated[Manager, Depends(admin_manager)]


@dataclass(frozen=True, slots=True)
class EditorPage:
    """The editor's page: what the fields hold, each field's refusal, the preview."""

    creating: bool
    name: str  # the stored persona's name (editing), "" when creating
    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # a refusal of the whole change (a name clash, gone)
    preview: list[Skill] | None = None
    modes: tuple[str, ...] = MODES

    @property
    def action(self) -> str:
        return "/personas/new" if self.creating else f"/personas/{self.name}/edit"


def values_of(document: dict[str, Any]) -> dict[str, str]:
    """A stored document as the form's field texts."""
    values = {key: str(document.get(key) or "") for key in TEXT_FIELDS}
    for key in LIST_FIELDS:
        values[key] = "\n".join(document.get(key) or [])
    values["permission_mode"] = str(document.get("permission_mode") or MODES[0])
    values["max_turns"] = str(document.get("max_turns") or "")
    values["prompt"] = str(document.get("prompt") or "")
    values["can_delegate"] = "on" if document.get("can_delegate") is True else ""
    return values


def posted_values(form: Form) -> dict[str, str]:
    """The field texts as posted (what the page shows again)."""
    names = (*TEXT_FIELDS, *LIST_FIELDS, "permission_mode", "max_turns", "prompt")
    values = {key: (form.get(key) or "").replace("\r\n", "\n") for key in names}
    values["can_delegate"] = "on" if form.get("can_delegate") == "on" else ""
    return values


def document_from(values: dict[str, str]) -> dict[str, Any]:
    """The document the fields say: an empty optional field is left out (its default), tool
    patterns one per line (or separated by commas), ``max_turns`` a number when it is one."""
    document: dict[str, Any] = {
        "name": values["name"].strip(),
        "description": values["description"],
        "when_to_use": values["when_to_use"],
        "permission_mode": values["permission_mode"],
        "prompt": values["prompt"],
    }
    for key in LIST_FIELDS:
        patterns = [p for p in _SPLIT.split(values[key]) if p]
        if patterns:
            document[key] = patterns
    turns = values["max_turns"].strip()
    if turns:
        document["max_turns"] = int(turns) if turns.isdigit() and len(turns) < 6 else turns
    for key in ("model", "critical_reminder"):
        if values[key].strip():
            document[key] = values[key].strip()
    if values.get("can_delegate") == "on":
        document["can_delegate"] = True
    return document


def editor(request: Request, page: EditorPage, status: int = 200) -> Response:
    title = "New persona" if page.creating else f"Edit {page.name}"
    return render(
        request, "persona_edit.html", status=status, section="personas", title=title, page=page
    )


def _refused(page: EditorPage, exc: SkillError) -> tuple[EditorPage, int]:
    status = STATUS_BY_CODE.get(exc.code, 400)
    if isinstance(exc, InvalidPersona) and exc.field in page.values:
        errors = {exc.field: exc.message}
        return EditorPage(page.creating, page.name, page.values, errors), status
    return EditorPage(page.creating, page.name, page.values, problem=exc.message), status


async def _post(
    request: Request, manager: Manager, actor: str, form: Form, name: str | None
) -> Response:
    values = posted_values(form)
    page = EditorPage(name is None, name or "", values)
    action = form.get("_action", "save")
    if action not in ("save", "preview"):
        raise InvalidRequest("_action must be save or preview")
    document = document_from(values)
    try:
        if action == "preview":
            persona = persona_from_document(document, name=name)
            offered = toolspec.offered(manager.registry, persona)
            return editor(request, EditorPage(page.creating, page.name, values, preview=offered))
        if name is None:
            persona = await asyncio.to_thread(manager.personas.create, document, actor)
        else:
            persona = await asyncio.to_thread(manager.personas.update, name, document, actor)
    except SkillError as exc:
        refused, status = _refused(page, exc)
        return editor(request, refused, status)
    manager.tell_listeners()
    return RedirectResponse(f"/personas/{persona.name}", status_code=303)


@router.get("/personas/new")
async def new_persona(request: Request, _manager: AdminManager) -> Response:
    blank = values_of({"permission_mode": PermissionMode.READ_ONLY.value})
    return editor(request, EditorPage(True, "", blank))


@router.post("/personas/new")
async def create_persona(
    request: Request, session: Session, manager: AdminManager, form: CheckedForm
) -> Response:
    return await _post(request, manager, session.principal.name, form, None)


def _stored_document(manager: Manager, name: str) -> dict[str, Any]:
    """The stored persona's document (a shadowed one's too); Conflict for a file or bundled
    persona with no stored one behind it, NotFound else."""
    try:
        entry = manager.personas.stored(name)
    except NotFound:
        found = manager.holder.current.personas.get(name)
        if found is not None:
            raise Conflict(f"the persona {name!r} is {source_of(found)}: read-only here") from None
        raise
    return document_of(entry.persona) if entry.persona is not None else entry.row.document


@router.get("/personas/{name}/edit")
async def edit_persona(request: Request, name: Name, manager: AdminManager) -> Response:
    document = await asyncio.to_thread(_stored_document, manager, name)
    return editor(request, EditorPage(False, name, values_of(document)))


@router.post("/personas/{name}/edit")
async def update_persona(
    request: Request, name: Name, session: Session, manager: AdminManager, form: CheckedForm
) -> Response:
    return await _post(request, manager, session.principal.name, form, name)


@router.get("/personas/{name}/delete")
async def confirm_delete(request: Request, name: Name, manager: AdminManager) -> Response:
    await asyncio.to_thread(_stored_document, manager, name)
    return render(
        request, "persona_delete.html", section="personas", title=f"Delete {name}?", name=name
    )


@router.post("/personas/{name}/delete")
async def delete_persona(
    name: Name, session: Session, manager: AdminManager, form: CheckedForm
) -> Response:
    if form.get("confirmed") != "yes":
        raise InvalidRequest("deleting a persona needs confirmed=yes (the confirmation page)")
    await asyncio.to_thread(manager.personas.delete, name, session.principal.name)
    manager.tell_listeners()
    return RedirectResponse("/personas", status_code=303)
