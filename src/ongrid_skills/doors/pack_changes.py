"""What the HTTP doors share to change packs: the packs of a served manager, the largest upload,
an uploaded archive handed to the installer, and a change made visible before the answer.

The REST routes (``/v1/packs``) and the console's packs page both call these, so an upload, a
limit or a reload after a change is one code path whichever door it came through; the install
itself is :class:`ongrid_skills.packs.service.Packs`. Who may call them (admins) is the doors'
to check first, with the gate. This module holds no route and must never import a door.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile

from ongrid_skills.manager import Manager
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.install import Outcome
from ongrid_skills.packs.service import Packs, dry_run_view
from ongrid_skills.packs.unpack import stream_cap
from ongrid_skills.runtime import open_packs, sync_packs
from ongrid_skills.settings import Settings

#: Room for the multipart envelope and a signature file beside the archive itself.
UPLOAD_OVERHEAD = 1024 * 1024
#: How long a change over HTTP waits for another pack change (a CLI's, say) to finish before
#: its 409 ``conflict``: a command line waits ten minutes, a request should not hold that long.
HTTP_LOCK_WAIT_SECONDS = 30.0
#: A change that made a version active (the REST door answers 201 for these).
ACTIVATING = frozenset({"install", "upgrade", "downgrade"})
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._+-]")


def upload_limit(settings: Settings) -> int:
    """The largest upload body: the largest archive unpacking accepts, plus room."""
    return stream_cap(Limits.from_settings(settings)) + UPLOAD_OVERHEAD


def packs_of(manager: Manager) -> Packs:
    """The packs of the manager's data dir; names are checked against its current registry."""
    return open_packs(
        manager.settings,
        manager.store,
        lambda: manager.registry,
        lock_wait=HTTP_LOCK_WAIT_SECONDS,
    )


def shown_name(filename: str | None) -> str:
    """An uploaded file's name as recorded (``upload:<name>``): its last part, in safe
    characters, at most 200 of them."""
    return _SAFE_NAME.sub("_", Path(filename or "upload.tar.gz").name)[:200]


async def install_upload(
    packs: Packs,
    actor: str,
    archive: UploadFile,
    signature: UploadFile | None,
    *,
    allow_unsigned: bool,
) -> Outcome:
    """Install an uploaded archive (and its ``.sig``): a remote source, so it must be signed
    by a trusted key unless ``allow_unsigned``. The files are copied into a staging folder of
    the packs first; the blocking work runs in a worker thread."""
    with packs.work() as work:
        target = work / "upload"
        await asyncio.to_thread(_save, archive, target)
        sig_path = None
        if signature is not None:
            sig_path = work / "upload.sig"
            await asyncio.to_thread(_save, signature, sig_path)
        return await asyncio.to_thread(
            packs.install_file,
            target,
            actor,
            work,
            shown=shown_name(archive.filename),
            signature=sig_path,
            allow_unsigned=allow_unsigned,
        )


async def inspect_upload(
    packs: Packs, archive: UploadFile, signature: UploadFile | None, *, allow_unsigned: bool
) -> dict[str, Any]:
    """A dry run of an uploaded archive (see :func:`install_upload`): what it would bring."""
    with packs.work() as work:
        target = work / "upload"
        await asyncio.to_thread(_save, archive, target)
        sig_path = None
        if signature is not None:
            sig_path = work / "upload.sig"
            await asyncio.to_thread(_save, signature, sig_path)
        seen = await asyncio.to_thread(
            packs.inspect_file,
            target,
            work,
            shown=shown_name(archive.filename),
            signature=sig_path,
            allow_unsigned=allow_unsigned,
        )
        return dry_run_view(seen, packs.home.active().get(seen.summary["id"]))


def _save(upload: UploadFile, target: Path) -> None:
    upload.file.seek(0)
    with open(target, "xb") as out:
        shutil.copyfileobj(upload.file, out, 1024 * 1024)


async def settle(manager: Manager, actor: str, outcome: Outcome) -> None:
    """Make a change visible before answering: the registry is reloaded (audited as
    ``actor``; MCP clients get ``list_changed``) when the active packs changed."""
    if outcome.action != "unchanged":
        await sync_packs(manager, actor)
