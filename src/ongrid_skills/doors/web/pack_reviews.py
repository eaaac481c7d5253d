"""Uploaded archives waiting for their Confirm: the console's "review, then confirm" of an upload.

An upload is reviewed first (its capability summary is shown) and installed only when the admin
confirms; the browser cannot send the file again without asking for it, so the archive (and its
signature) stays on the server in between, here::

    $ONGRID_DATA_DIR/packs/.reviews/<id>/
      upload          the archive as uploaded (at most the upload limit)
      upload.sig      its signature, when one was uploaded
      review.json     the session it belongs to (the hash of its id), when, the name shown,
                      "allow unsigned", the digest the summary showed

``<id>`` is random (128 bits) and works only for the session that uploaded it: another session,
even of the same admin, gets "no such review". A review lives :data:`REVIEW_SECONDS` at most and
is used once (Confirm or Discard delete it, whatever the outcome); at most :data:`MAX_REVIEWS`
wait at once (the oldest goes first). A refused review deletes its folder before the answer, so
nothing is left. Expired folders are swept at each review and confirm. The Confirm installs
these very bytes, bound to the digest shown: anything else is refused.

This module only keeps files; who may call (an admin with a CSRF-checked form) is the routes'.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from starlette.datastructures import UploadFile

from ongrid_skills.errors import NotFound
from ongrid_skills.packs.home import PackHome, remove_tree

REVIEWS_DIR = ".reviews"
#: How long an uploaded archive waits for its Confirm.
REVIEW_SECONDS = 15 * 60
#: Uploads waiting for a Confirm at once, all sessions together (each at most the upload limit).
MAX_REVIEWS = 8
REVIEW_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_META = "review.json"
GONE = (
    "this review has expired, was already used, or belongs to another session: "
    "upload the archive again"
)


@dataclass(frozen=True, slots=True)
class Review:
    """An upload waiting for its Confirm."""

    id: str
    folder: Path
    shown: str
    allow_unsigned: bool
    digest: str | None

    @property
    def archive(self) -> Path:
        return self.folder / "upload"

    @property
    def signature(self) -> Path | None:
        path = self.folder / "upload.sig"
        return path if path.exists() else None


class Reviews:
    """The uploads of one data dir's packs waiting for their Confirm."""

    def __init__(self, home: PackHome) -> None:
        self.root = home.root / REVIEWS_DIR
        self.home = home

    def stage(
        self,
        session: str,
        archive: UploadFile,
        signature: UploadFile | None,
        *,
        shown: str,
        allow_unsigned: bool,
    ) -> Review:
        """Keep an upload for ``session`` (blocking: copies the files)."""
        self.sweep()
        self.home.ensure()
        review_id = secrets.token_urlsafe(16)
        folder = self.root / review_id
        for _ in range(3):  # a discard may remove the emptied .reviews/ in between
            self.root.mkdir(mode=0o700, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                folder.mkdir(mode=0o700)
                break
        else:
            folder.mkdir(mode=0o700)
        try:
            _save(archive, folder / "upload")
            if signature is not None:
                _save(signature, folder / "upload.sig")
            meta = {
                "session": session,
                "created": time.time(),
                "shown": shown,
                "allow_unsigned": allow_unsigned,
                "digest": None,
            }
            (folder / _META).write_text(json.dumps(meta))
        except BaseException:
            remove_tree(folder)
            raise
        return Review(review_id, folder, shown, allow_unsigned, None)

    def seal(self, review: Review, digest: str) -> Review:
        """Record the digest the summary showed: the Confirm must install that."""
        path = review.folder / _META
        meta = json.loads(path.read_text())
        meta["digest"] = digest
        path.write_text(json.dumps(meta))
        return Review(review.id, review.folder, review.shown, review.allow_unsigned, digest)

    def find(self, review_id: str, session: str) -> Review:
        """``review_id`` of ``session``, not expired; NotFound (:data:`GONE`) otherwise."""
        self.sweep()
        if not REVIEW_ID.fullmatch(review_id):
            raise NotFound(GONE)
        folder = self.root / review_id
        try:
            meta = json.loads((folder / _META).read_text())
        except (OSError, ValueError):
            raise NotFound(GONE) from None
        if not secrets.compare_digest(str(meta.get("session")), session):
            raise NotFound(GONE)
        return Review(
            review_id,
            folder,
            str(meta["shown"]),
            bool(meta["allow_unsigned"]),
            meta.get("digest"),
        )

    def take(self, review_id: str, session: str) -> Review:
        """:meth:`find`, claimed for one Confirm or Cancel: its folder is renamed first, so a
        second post of the same review (a double click) finds nothing."""
        review = self.find(review_id, session)
        claimed = self.root / f"{review_id}.{secrets.token_hex(4)}"
        try:
            os.rename(review.folder, claimed)
        except FileNotFoundError:
            raise NotFound(GONE) from None
        return Review(review.id, claimed, review.shown, review.allow_unsigned, review.digest)

    def discard(self, review: Review) -> None:
        """Delete a review's files, and ``.reviews/`` once empty (nothing is left behind)."""
        remove_tree(review.folder)
        with contextlib.suppress(OSError):
            self.root.rmdir()

    def sweep(self) -> None:
        """Delete the expired reviews, and the oldest beyond :data:`MAX_REVIEWS` - 1 (room for
        one more)."""
        now = time.time()
        kept: list[tuple[float, Path]] = []
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.root):
                folder = Path(entry.path)
                try:
                    created = float(json.loads((folder / _META).read_text())["created"])
                except (OSError, ValueError, KeyError, TypeError):
                    created = entry.stat(follow_symlinks=False).st_mtime
                if now - created > REVIEW_SECONDS or now < created - 60:
                    remove_tree(folder)
                else:
                    kept.append((created, folder))
        kept.sort()
        for _, folder in kept[: max(0, len(kept) - (MAX_REVIEWS - 1))]:
            remove_tree(folder)


def _save(upload: UploadFile, target: Path) -> None:
    upload.file.seek(0)
    with open(target, "xb") as out:
        shutil.copyfileobj(upload.file, out, 1024 * 1024)
