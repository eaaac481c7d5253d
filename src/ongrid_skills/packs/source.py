"""A pack on disk (a folder, a ``.tar.gz``, ``.tar`` or ``.zip``) → a checked staging copy.

:func:`stage` is the one way in for every command that takes a pack: it unpacks an archive
(:mod:`.unpack`) or copies a folder (with the same rules: no link, no special file, the
limits) into a new folder under ``into``, finds the pack's root and layout, and computes the
digest of what was staged — so what is digested is exactly what will be installed. The
signature is read but not judged (:mod:`.trust` does that):

- ``signature=PATH`` when given;
- else ``<archive>.sig`` beside an archive, when it exists;
- else ``pack.sig`` at the pack's root, when it exists.

An install renames ``StagedPack.staging`` into place (so ``into`` should be on the same
filesystem as the destination); anything else discards it. On any failure the staging folder
is removed before the error is raised.

It must never write outside ``into``, and never leave a staging folder behind on failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ongrid_skills.errors import PackError
from ongrid_skills.packs.digest import digest_of, hash_file
from ongrid_skills.packs.files import SIGNATURE_FILE, Limits, PackFile, walk_folder
from ongrid_skills.packs.layout import Detected, detect, find_root
from ongrid_skills.packs.manifest import PackManifest
from ongrid_skills.packs.signature import PackSignature, beside, read_signature
from ongrid_skills.packs.unpack import Writer, unpack_archive

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")


@dataclass(frozen=True, slots=True)
class StagedPack:
    """A pack copied into a staging folder of its own and checked for safety.

    ``staging`` is the folder to rename into place or discard; ``root`` the pack's root inside
    it (``staging`` itself, or its only subfolder); ``files`` the pack's files (``pack.sig``
    left out) and ``digest`` their digest; ``signature`` the signature found, not yet judged,
    and ``signature_origin`` where it was found.
    """

    source: str
    staging: Path
    root: Path
    detected: Detected
    files: tuple[PackFile, ...]
    digest: str
    signature: PackSignature | None
    signature_origin: str | None

    @property
    def manifest(self) -> PackManifest:
        return self.detected.manifest

    def discard(self) -> None:
        """Remove the staging folder (nothing happens once it was renamed away)."""
        shutil.rmtree(self.staging, ignore_errors=True)


def is_archive_name(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def archive_stem(path: Path) -> str:
    """``ops-basics-1.0.0`` for ``ops-basics-1.0.0.tar.gz``."""
    name = path.name
    for suffix in ARCHIVE_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def stage(
    source: Path,
    into: Path,
    limits: Limits | None = None,
    *,
    signature: Path | None = None,
    name: str | None = None,
) -> StagedPack:
    """Stage the pack at ``source`` (a folder or an archive) into a new folder under ``into``.

    ``name`` is what a bare skills folder's id is made from (default: the folder's name, or
    the archive's without its suffix). Raises UnsafePack, PackError or BadSignature (an
    unreadable signature file); nothing is left under ``into`` then.
    """
    limits = limits or Limits()
    if source.is_dir():
        staging = _copy_folder(source, into, limits)
        fallback = source.resolve().name
    elif source.is_file():
        staging = unpack_archive(source, into, limits)
        fallback = archive_stem(source)
    else:
        raise PackError(f"{source}: no such folder or archive")
    try:
        root = find_root(staging)
        if root != staging:
            fallback = root.name
        detected = detect(root, name or fallback)
        files = walk_folder(root, limits)
        digest = digest_of(hash_file(root, f) for f in files)
        sig_path = _signature_path(source, root, signature)
        found = read_signature(sig_path) if sig_path is not None else None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    origin = None if found is None or sig_path is None else str(sig_path)
    if origin is not None and sig_path == root / SIGNATURE_FILE:
        origin = SIGNATURE_FILE
    return StagedPack(str(source), staging, root, detected, tuple(files), digest, found, origin)


@contextmanager
def staged(
    source: Path,
    limits: Limits | None = None,
    *,
    signature: Path | None = None,
    into: Path | None = None,
) -> Iterator[StagedPack]:
    """:func:`stage` into a temporary folder (or ``into``), discarded on leaving the block."""
    with tempfile.TemporaryDirectory(prefix="ongrid-pack-", dir=into) as tmp:
        pack = stage(source, Path(tmp), limits, signature=signature)
        try:
            yield pack
        finally:
            pack.discard()


def _signature_path(source: Path, root: Path, given: Path | None) -> Path | None:
    if given is not None:
        if not given.is_file():
            raise PackError(f"{given}: no such signature file")
        return given
    if source.is_file() and beside(source).exists():
        return beside(source)
    inside = root / SIGNATURE_FILE
    return inside if inside.exists() or inside.is_symlink() else None


def _copy_folder(source: Path, into: Path, limits: Limits) -> Path:
    """A copy of the pack folder ``source`` under ``into``, by the rules of unpacking."""
    files = walk_folder(source, limits, signature=True)  # refuses links and special files
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=into))
    try:
        writer = Writer(staging, limits)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
        for file in files:
            with open(os.open(source / file.path, flags), "rb") as data:
                writer.file(file.path, file.mode, data)
    except OSError as exc:  # a file removed or made unreadable while it was copied
        shutil.rmtree(staging, ignore_errors=True)
        raise PackError(f"{source}: cannot copy: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging
