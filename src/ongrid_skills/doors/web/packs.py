"""The packs page, ``/packs``: the installed packs (versions, source, digest, signer, who and
when, their skills and personas), what the marketplace indexes offer (a search, each result's
versions, Install), Upgrade on a pack an index has a newer version of, an upload of an
archive, and Rollback and Remove behind a confirmation page. Installs (and upgrades) go
through a review first: :mod:`.pack_install`.

The rules are the REST routes' (``/v1/packs``): admins only (anyone else gets the gate's 403,
the answer REST gives their token; the navigation leaves the entry out for them), every change
through the same :class:`~ongrid_skills.packs.service.Packs` calls and
:mod:`ongrid_skills.doors.pack_changes` (upload, reload before the answer), so each is one
audit entry as its caller and the catalogue holds it at once. A change is a form post with the
session's CSRF token (an upload: :data:`~ongrid_skills.doors.web.forms.CheckedUpload`). A
refused change is shown on the page with its error code and every problem, at the status that
code has through REST; nothing changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from ongrid_skills.doors.pack_changes import packs_of, settle
from ongrid_skills.doors.web.credential_views import PackSlot, pack_slots
from ongrid_skills.doors.web.forms import CheckedForm, Form
from ongrid_skills.doors.web.pack_views import (
    Market,
    done,
    read_market,
    refusal,
    short_digest,
    shown_time,
)
from ongrid_skills.doors.web.sessions import Session, WebSession, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import Conflict, InvalidRequest, SkillError
from ongrid_skills.governance.gate import require_role
from ongrid_skills.packs.install import Outcome
from ongrid_skills.packs.service import Packs
from ongrid_skills.types import Role

router = APIRouter()

PACK_ID = r"^[a-z0-9_.-]{1,64}$"
PackId = Annotated[str, Path(pattern=PACK_ID)]
#: What Remove and Rollback ask before they act: a second post with ``confirmed=yes``.
CONFIRM_FIELD = "confirmed"
#: The Roll back offered right after an install names the version it undoes: when another
#: change made another version active since, it is refused (nothing changes).
UNDO_FIELD = "undo"


async def admin_packs(request: Request, session: Session) -> Packs:
    """The packs of the served data dir, for an admin; the gate's Forbidden otherwise. Routes
    list it before their form, so a refused caller's body is never read."""
    require_role(session.principal, Role.ADMIN)
    return packs_of(manager_of(request))


AdminPacks = Annotated[Packs, Depends(admin_packs)]


async def packs_page(
    request: Request,
    packs: Packs,
    query: str = "",
    *,
    outcome: Outcome | None = None,
    error: SkillError | None = None,
) -> Response:
    """The page, with a change's notice or a refusal on top."""
    market = await asyncio.to_thread(read_market, packs, query)
    refused = refusal(error) if error is not None else None
    slots, names = await asyncio.to_thread(binders, request, market)
    return render(
        request,
        "packs.html",
        status=refused.status if refused is not None else 200,
        section="packs",
        title="Packs",
        market=market,
        done=done(outcome) if outcome is not None else None,
        refused=refused,
        short_digest=short_digest,
        shown_time=shown_time,
        pack_slots=slots,
        credential_names=names,
    )


def binders(request: Request, market: Market) -> tuple[dict[str, list[PackSlot]], list[str]]:
    """The credential slots each installed pack's skills declare (with the pack's bindings),
    and the names of the stored credentials to choose from (blocking: reads the store)."""
    manager = manager_of(request)
    bindings = manager.credentials.bindings(fresh=True)
    registry = manager.registry
    slots = {
        pack["id"]: pack_slots(registry, pack["id"], list(pack.get("skills") or ()), bindings)
        for pack in market.installed
    }
    names = [c.name for c in manager.credentials.all()] if any(slots.values()) else []
    return slots, names


async def change(
    request: Request,
    session: WebSession,
    packs: Packs,
    work: Callable[[], Awaitable[Outcome]],
) -> Response:
    """Run a change; answer the page with what it did (the registry already holds it), or
    with why it was refused."""
    try:
        outcome = await work()
    except SkillError as exc:
        return await packs_page(request, packs, error=exc)
    await settle(manager_of(request), session.principal.name, outcome)
    return await packs_page(request, packs, outcome=outcome)


def allow_unsigned(value: str | None) -> bool:
    """The "allow unsigned" checkbox: ``true`` when ticked, absent when not."""
    if value not in (None, "true"):
        raise InvalidRequest("allow_unsigned must be true or absent")
    return value == "true"


@router.get("/packs")
async def packs_index(
    request: Request, packs: AdminPacks, q: Annotated[str, Query(max_length=200)] = ""
) -> Response:
    return await packs_page(request, packs, q)


async def confirm_page(request: Request, packs: Packs, pack_id: str, action: str) -> Response:
    """What Rollback or Remove would do, and the button that does it."""
    pack = await asyncio.to_thread(packs.show, pack_id)
    return render(
        request,
        "pack_confirm.html",
        section="packs",
        title=f"{action.capitalize()} {pack_id}",
        action=action,
        pack=pack,
        short_digest=short_digest,
    )


@router.get("/packs/{pack_id}/{action}")
async def confirm(
    request: Request,
    pack_id: PackId,
    action: Annotated[str, Path(pattern="^(rollback|remove)$")],
    packs: AdminPacks,
) -> Response:
    return await confirm_page(request, packs, pack_id, action)


@router.post("/packs/{pack_id}/rollback")
async def rollback(
    request: Request, pack_id: PackId, session: Session, packs: AdminPacks, form: CheckedForm
) -> Response:
    """Back to the previous version: ``POST /v1/packs/{id}/rollback``, once confirmed."""
    if form.get(CONFIRM_FIELD) != "yes":
        return await confirm_page(request, packs, pack_id, "rollback")

    def work() -> Awaitable[Outcome]:
        still_active(packs, pack_id, form)
        return asyncio.to_thread(packs.rollback, pack_id, session.principal.name)

    return await change(request, session, packs, work)


@router.post("/packs/{pack_id}/remove")
async def remove(
    request: Request, pack_id: PackId, session: Session, packs: AdminPacks, form: CheckedForm
) -> Response:
    """Withdraw every skill and persona of the pack: ``DELETE /v1/packs/{id}``, once
    confirmed."""
    if form.get(CONFIRM_FIELD) != "yes":
        return await confirm_page(request, packs, pack_id, "remove")

    def work() -> Awaitable[Outcome]:
        still_active(packs, pack_id, form)
        return asyncio.to_thread(packs.remove, pack_id, session.principal.name)

    return await change(request, session, packs, work)


def still_active(packs: Packs, pack_id: str, form: Form) -> None:
    """A Roll back offered after an install undoes that install only: Conflict when the
    version it names (:data:`UNDO_FIELD`) is no longer the active one."""
    undo = form.get(UNDO_FIELD)
    if undo is None:
        return
    active = packs.home.active().get(pack_id)
    if active != undo:
        now = f"{active} is active now" if active else "it is not installed now"
        raise Conflict(
            f"the Roll back was offered for {pack_id} {undo}, but {now}: nothing changed"
        )
