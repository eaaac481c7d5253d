"""The credentials page, ``/credentials``, and the binders of the skill and pack pages
(SPEC §18, docs/credentials.md).

- ``GET /credentials``: every stored credential (names, field kinds, bindings, who and when,
  last used: never a value) and the form that creates one;
- ``POST /credentials``, ``POST /credentials/{name}/rotate``, ``POST /credentials/{name}/delete``;
- ``POST /skills/{name}/credentials/{slot}/bind`` and ``…/unbind``: a skill's own binding;
- ``POST /packs/{id}/credentials/{slot}/bind`` and ``…/unbind``: the binding of a pack's skills.

The rules are the REST routes' (``/v1/credentials``): admins only (anyone else gets the gate's
403 before the form is read), every change through the same calls (``Credentials`` and the
manager's ``bind_credential`` / ``unbind_credential``, which void pending approvals of the skills
concerned and refresh what is offered), so each is one audit entry as its caller. Values travel
in form posts only: a change that goes through redirects (no page holds them, a reload posts
nothing again); a refused one answers the page at the status its code has through REST, with
the error, and the create form again with its name and field names only, its value and
reference boxes empty.
"""

from __future__ import annotations

import asyncio
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import RedirectResponse, Response

from ongrid_skills.credentials.service import NAME_RE, Credentials
from ongrid_skills.doors.web.credential_views import (
    CREATE_ROWS,
    credential_view,
    field_names,
    read_fields,
)
from ongrid_skills.doors.web.forms import CheckedForm
from ongrid_skills.doors.web.pack_views import refusal
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import InvalidRequest, SkillError
from ongrid_skills.governance.gate import require_role
from ongrid_skills.skills.credential_slots import SLOT_RE
from ongrid_skills.types import Role

router = APIRouter()

CredentialName = Annotated[str, Path(min_length=1, max_length=64)]
SlotName = Annotated[str, Path(pattern=f"^{SLOT_RE.pattern}$")]
PackId = Annotated[str, Path(pattern=r"^[a-z0-9_.-]{1,64}$")]
#: What a change that went through says, by the ``done`` of its redirect.
NOTICES = {
    "created": "Created {name}: its values are sealed and will not be shown again.",
    "rotated": "Rotated {name}: the next call uses the new values.",
    "deleted": "Deleted {name}.",
}


async def admin_credentials(request: Request, session: Session) -> Credentials:
    """The credential store, for an admin; the gate's Forbidden otherwise. Routes list it
    before their form, so a refused caller's body (values) is never read."""
    require_role(session.principal, Role.ADMIN)
    return manager_of(request).credentials


AdminCredentials = Annotated[Credentials, Depends(admin_credentials)]


async def credentials_page(
    request: Request,
    creds: Credentials,
    *,
    notice: str | None = None,
    error: SkillError | None = None,
    names: list[str] | None = None,
    name: str = "",
) -> Response:
    """The page, with a notice or a refusal on top; ``name`` and ``names`` fill the create
    form again after a refused create (never a value or a reference)."""
    items = [credential_view(info) for info in await asyncio.to_thread(creds.all)]
    refused = refusal(error) if error is not None else None
    rows = (names or [])[:CREATE_ROWS]
    return render(
        request,
        "credentials.html",
        status=refused.status if refused is not None else 200,
        section="credentials",
        title="Credentials",
        items=items,
        notice=notice,
        refused=refused,
        create_name=name,
        create_rows=rows + [""] * (CREATE_ROWS - len(rows)),
    )


def changed(what: str, name: str) -> Response:
    return RedirectResponse(f"/credentials?done={what}&name={quote(name)}", status_code=303)


@router.get("/credentials")
async def credentials_index(
    request: Request,
    creds: AdminCredentials,
    done: Annotated[str | None, Query(max_length=20)] = None,
    name: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    notice = None
    if done in NOTICES and name is not None and NAME_RE.fullmatch(name):
        notice = NOTICES[done].format(name=name)
    return await credentials_page(request, creds, notice=notice)


@router.post("/credentials")
async def create(
    request: Request, session: Session, creds: AdminCredentials, form: CheckedForm
) -> Response:
    """``POST /v1/credentials``: a name and one or more fields, each a value or a reference."""
    name = (form.get("name") or "").strip()
    try:
        values, references = read_fields(form, keep_empty=False)
        await asyncio.to_thread(creds.create, name, values, references, session.principal.name)
    except SkillError as exc:
        shown = name[:64] if NAME_RE.fullmatch(name[:64]) else ""
        return await credentials_page(
            request, creds, error=exc, names=field_names(form), name=shown
        )
    return changed("created", name)


@router.post("/credentials/{name}/rotate")
async def rotate(
    request: Request,
    name: CredentialName,
    session: Session,
    creds: AdminCredentials,
    form: CheckedForm,
) -> Response:
    """``POST /v1/credentials/{name}/rotate``: new values or references for some fields (the
    rows left empty keep theirs)."""
    try:
        values, references = read_fields(form, keep_empty=True)
        await asyncio.to_thread(creds.rotate, name, values, references, session.principal.name)
    except SkillError as exc:
        return await credentials_page(request, creds, error=exc)
    return changed("rotated", name)


@router.post("/credentials/{name}/delete")
async def delete(
    request: Request,
    name: CredentialName,
    session: Session,
    creds: AdminCredentials,
    _form: CheckedForm,
) -> Response:
    """``DELETE /v1/credentials/{name}``: refused (409) while anything is bound to it."""
    try:
        await asyncio.to_thread(creds.delete, name, session.principal.name)
    except SkillError as exc:
        return await credentials_page(request, creds, error=exc)
    return changed("deleted", name)


# ---- binders ------------------------------------------------------------------------------------
def chosen(credential: str | None) -> str:
    """The credential a binder's select named (a name of the store's rule)."""
    if not credential:
        raise InvalidRequest("choose a credential to bind")
    if not NAME_RE.fullmatch(credential):
        raise InvalidRequest("that is not a credential name")
    return credential


@router.post("/skills/{name}/credentials/{slot}/bind")
async def bind_skill(
    request: Request,
    name: str,
    slot: SlotName,
    session: Session,
    _creds: AdminCredentials,
    form: CheckedForm,
) -> Response:
    """``POST /v1/credentials/{credential}/bind`` with ``{"slot", "skill"}``."""
    manager = manager_of(request)
    skill = manager.registry.resolve(name)
    credential = chosen(form.get("credential"))
    await manager.bind_credential(
        credential, slot, session.principal.name, skill=skill.name, pack=None
    )
    return RedirectResponse(f"/skills/{quote(skill.name)}#credentials", status_code=303)


@router.post("/skills/{name}/credentials/{slot}/unbind")
async def unbind_skill(
    request: Request,
    name: str,
    slot: SlotName,
    session: Session,
    _creds: AdminCredentials,
    _form: CheckedForm,
) -> Response:
    """``POST /v1/credentials/unbind`` with ``{"slot", "skill"}``: the skill's own binding."""
    manager = manager_of(request)
    skill = manager.registry.resolve(name)
    await manager.unbind_credential(slot, session.principal.name, skill=skill.name, pack=None)
    return RedirectResponse(f"/skills/{quote(skill.name)}#credentials", status_code=303)


@router.post("/packs/{pack_id}/credentials/{slot}/bind")
async def bind_pack(
    request: Request,
    pack_id: PackId,
    slot: SlotName,
    session: Session,
    _creds: AdminCredentials,
    form: CheckedForm,
) -> Response:
    """``POST /v1/credentials/{credential}/bind`` with ``{"slot", "pack"}``: every skill of
    the pack that declares the slot and has no binding of its own gets it."""
    credential = chosen(form.get("credential"))
    await manager_of(request).bind_credential(
        credential, slot, session.principal.name, skill=None, pack=pack_id
    )
    return RedirectResponse(f"/packs#pack-{quote(pack_id)}", status_code=303)


@router.post("/packs/{pack_id}/credentials/{slot}/unbind")
async def unbind_pack(
    request: Request,
    pack_id: PackId,
    slot: SlotName,
    session: Session,
    _creds: AdminCredentials,
    _form: CheckedForm,
) -> Response:
    """``POST /v1/credentials/unbind`` with ``{"slot", "pack"}``."""
    await manager_of(request).unbind_credential(
        slot, session.principal.name, skill=None, pack=pack_id
    )
    return RedirectResponse(f"/packs#pack-{quote(pack_id)}", status_code=303)
