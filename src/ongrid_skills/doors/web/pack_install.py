"""Installing through the packs page: review, then confirm.

The first post of an install form (a pack of the indexes, a URL or git source, an upload) changes
nothing: it answers the pack's capability summary (``POST /v1/packs`` with ``dry_run``: skills
with their class and scope, personas with their permission mode, what they need from this host,
the warnings, signer and trust, the digest) and a Confirm button. The Confirm installs exactly
what was reviewed: it carries the digest shown, and the install is refused (``digest_mismatch``,
nothing changed) when the source now yields another pack. An upload stays on the server between
the two (:mod:`.pack_reviews`: bound to the session, used once, expiring); a source is fetched
again and checked against the digest.

The rules are those of :mod:`.packs`: admins only, CSRF-checked forms, refusals on the page with
the code and status REST gives. After an install the page offers Roll back at once (see
:func:`~ongrid_skills.doors.web.pack_views.done`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Sequence
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from ongrid_skills.doors.pack_changes import shown_name
from ongrid_skills.doors.web.forms import CheckedForm, CheckedUpload, Form
from ongrid_skills.doors.web.pack_reviews import Review, Reviews
from ongrid_skills.doors.web.packs import (
    CONFIRM_FIELD,
    PACK_ID,
    AdminPacks,
    PackId,
    allow_unsigned,
    change,
    packs_page,
)
from ongrid_skills.doors.web.sessions import Session, WebSession
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import InvalidRequest, SkillError
from ongrid_skills.packs.install import Outcome
from ongrid_skills.packs.service import Packs, dry_run_view

router = APIRouter()

_VERSION = re.compile(r"[0-9A-Za-z.+-]{1,128}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: What a Confirm names as the thing its digest was bound by (in a refusal's message).
PINNED = "the review"


def install_source(form: Form) -> str:
    """What an install form asks for: a pack of the indexes (``pack`` and an optional
    ``version``) or a ``source`` (a URL, a git URL, ``ID[@VERSION]``), one or the other."""
    pack = form.get("pack") or ""
    version = form.get("version") or ""
    source = (form.get("source") or "").strip()
    if pack and source:
        raise InvalidRequest("give a pack of the indexes or a source, not both")
    if source:
        if len(source) > 4096:
            raise InvalidRequest("the source is over 4096 characters")
        return source
    if not pack:
        raise InvalidRequest("choose a pack of the indexes or give a source")
    if not re.fullmatch(PACK_ID, pack):
        raise InvalidRequest(f"{pack!r} is not a pack id ([a-z0-9_.-], at most 64)")
    if version and not _VERSION.fullmatch(version):
        raise InvalidRequest(f"{version!r} is not a version")
    return f"{pack}@{version}" if version else pack


def reviewed_digest(form: Form) -> str:
    """The digest a Confirm carries: the one its review showed."""
    digest = form.get("digest") or ""
    if not DIGEST.fullmatch(digest):
        raise InvalidRequest("a confirmation must carry the digest of its review (sha256:…)")
    return digest


def review_page(
    request: Request,
    view: dict[str, Any],
    action: str,
    fields: Sequence[tuple[str, str]],
    review_id: str | None = None,
) -> Response:
    return render(
        request,
        "pack_review.html",
        section="packs",
        title=f"Review {view['id']} {view['version']}",
        view=view,
        confirm_action=action,
        fields=fields,
        review_id=review_id,
    )


@router.post("/packs/install")
async def install(
    request: Request, session: Session, packs: AdminPacks, form: CheckedForm
) -> Response:
    """Review, then install, from the indexes or a remote source (``POST /v1/packs`` with
    JSON, first with ``dry_run``; a source of this host, a path or ``file://``, is refused
    there too: the CLI's job)."""
    source = install_source(form)
    allow = allow_unsigned(form.get("allow_unsigned"))
    if form.get(CONFIRM_FIELD) != "yes":
        try:
            view = await asyncio.to_thread(packs.dry_run, source, allow_unsigned=allow, local=False)
        except SkillError as exc:
            return await packs_page(request, packs, error=exc)
        fields = [(name, form.get(name) or "") for name in ("pack", "version", "source")]
        fields = [(name, value) for name, value in fields if value]
        if allow:
            fields.append(("allow_unsigned", "true"))
        return review_page(request, view, "/packs/install", fields)
    digest = reviewed_digest(form)

    def work() -> Awaitable[Outcome]:
        return asyncio.to_thread(
            packs.install,
            source,
            session.principal.name,
            allow_unsigned=allow,
            local=False,
            digest=digest,
            pinned=PINNED,
        )

    return await change(request, session, packs, work)


@router.post("/packs/{pack_id}/upgrade")
async def upgrade(
    request: Request, pack_id: PackId, session: Session, packs: AdminPacks, form: CheckedForm
) -> Response:
    """The review of the newest version the indexes offer (``POST /v1/packs/{id}/upgrade``
    after a look): its Confirm installs ``ID@NEWEST`` as the install form's does."""
    allow = allow_unsigned(form.get("allow_unsigned"))
    try:
        newest = await asyncio.to_thread(lambda: packs.catalog().resolve(pack_id).version)
        source = f"{pack_id}@{newest}"
        view = await asyncio.to_thread(packs.dry_run, source, allow_unsigned=allow, local=False)
    except SkillError as exc:
        return await packs_page(request, packs, error=exc)
    fields = [("pack", pack_id), ("version", newest)]
    if allow:
        fields.append(("allow_unsigned", "true"))
    return review_page(request, view, "/packs/install", fields)


@router.post("/packs/upload")
async def upload(
    request: Request, session: Session, packs: AdminPacks, form: CheckedUpload
) -> Response:
    """Review an uploaded archive (and its signature): kept on the server, its summary shown
    with a Confirm (``POST /v1/packs`` with multipart, first with ``dry_run``)."""
    archive = form.file("file")
    signature = form.file("signature")
    allow = allow_unsigned(form.field("allow_unsigned"))
    if archive is None:
        raise InvalidRequest("choose the pack archive (.tar.gz or .zip) to upload")
    reviews = Reviews(packs.home)
    review = await asyncio.to_thread(
        reviews.stage,
        session.info.id_hash,
        archive,
        signature,
        shown=shown_name(archive.filename),
        allow_unsigned=allow,
    )
    try:
        view = await asyncio.to_thread(inspect_review, packs, review)
    except SkillError as exc:
        await asyncio.to_thread(reviews.discard, review)
        return await packs_page(request, packs, error=exc)
    except BaseException:
        await asyncio.to_thread(reviews.discard, review)
        raise
    await asyncio.to_thread(reviews.seal, review, view["summary"]["digest"])
    return review_page(request, view, "/packs/upload/confirm", [("review", review.id)], review.id)


def inspect_review(packs: Packs, review: Review) -> dict[str, Any]:
    """The dry run of a kept upload (blocking)."""
    with packs.work() as work:
        seen = packs.inspect_file(
            review.archive,
            work,
            shown=review.shown,
            signature=review.signature,
            allow_unsigned=review.allow_unsigned,
        )
    return dry_run_view(seen, packs.home.active().get(seen.summary["id"]))


def install_review(packs: Packs, review: Review, actor: str, digest: str) -> Outcome:
    """Install a kept upload, bound to the digest its review showed (blocking)."""
    if review.digest != digest:
        raise InvalidRequest("this confirmation does not carry the digest its review showed")
    with packs.work() as work:
        return packs.install_file(
            review.archive,
            actor,
            work,
            shown=review.shown,
            signature=review.signature,
            allow_unsigned=review.allow_unsigned,
            digest=digest,
            pinned=PINNED,
        )


def find_review(session: WebSession, packs: Packs, form: Form) -> tuple[Reviews, Review]:
    """The kept upload a Confirm or a Cancel names, of this session, claimed (blocking)."""
    reviews = Reviews(packs.home)
    return reviews, reviews.take(form.get("review") or "", session.info.id_hash)


@router.post("/packs/upload/confirm")
async def confirm_upload(
    request: Request, session: Session, packs: AdminPacks, form: CheckedForm
) -> Response:
    """Install the upload reviewed; its kept copy is deleted whatever the outcome."""
    if form.get(CONFIRM_FIELD) != "yes":
        raise InvalidRequest("confirm the install with the Confirm button of its review")
    digest = reviewed_digest(form)
    try:
        reviews, review = await asyncio.to_thread(find_review, session, packs, form)
    except SkillError as exc:
        return await packs_page(request, packs, error=exc)

    async def work() -> Outcome:
        try:
            return await asyncio.to_thread(
                install_review, packs, review, session.principal.name, digest
            )
        finally:
            await asyncio.to_thread(reviews.discard, review)

    return await change(request, session, packs, work)


@router.post("/packs/upload/discard")
async def discard_upload(session: Session, packs: AdminPacks, form: CheckedForm) -> Response:
    """Cancel a review: its kept upload is deleted now (it would expire anyway)."""
    try:
        reviews, review = await asyncio.to_thread(find_review, session, packs, form)
    except SkillError:
        return RedirectResponse("/packs", status_code=303)  # gone already: nothing to delete
    await asyncio.to_thread(reviews.discard, review)
    return RedirectResponse("/packs#upload", status_code=303)
