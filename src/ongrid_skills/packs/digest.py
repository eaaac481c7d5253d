"""The pack digest: one SHA-256 naming every byte of a pack, whatever form it travels in.

The digest is ``sha256:`` followed by the lowercase hex SHA-256 of this text (UTF-8)::

    ongrid-pack-digest v1\\n
    <mode> <sha256 of the file's content, lowercase hex> <path>\\n     (one line per file)

- one line per file of the pack (:mod:`ongrid_skills.packs.files`: regular files only, folders
  contribute nothing, the root's ``pack.sig`` and ``.git`` folders are not part of the pack);
- ``<path>`` relative to the pack's root, ``/``-separated, as UTF-8 (paths never hold a control
  character, so a newline cannot forge a line);
- ``<mode>`` is ``755`` when the file's owner may execute it, else ``644``;
- lines sorted by the bytes of the UTF-8 path.

So a folder, the ``.tar.gz`` and the ``.zip`` of the same files give the same digest: the
archives' own metadata (mtimes, owners, order, compression) is not part of it. docs/packs.md
shows the same computation in a few lines of Python and of shell.

>>> lines = digest_text([FileHash("run.sh", 0o755, "0" * 64)])
>>> lines.splitlines()[1]
'755 0000000000000000000000000000000000000000000000000000000000000000 run.sh'

It reads files; it must never follow a link or trust a size it did not read.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ongrid_skills.packs.files import Limits, PackFile, walk_folder

HEADER = "ongrid-pack-digest v1\n"
PREFIX = "sha256:"
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileHash:
    """One line of the digest text: a file's path, normalised mode and content hash."""

    path: str
    mode: int
    sha256: str


def digest_text(files: Iterable[FileHash]) -> str:
    """The text whose SHA-256 is the digest (lines sorted by the UTF-8 bytes of the path)."""
    ordered = sorted(files, key=lambda f: f.path.encode("utf-8"))
    return HEADER + "".join(f"{f.mode:o} {f.sha256} {f.path}\n" for f in ordered)


def digest_of(files: Iterable[FileHash]) -> str:
    """``sha256:<hex>`` of :func:`digest_text`."""
    return PREFIX + hashlib.sha256(digest_text(files).encode("utf-8")).hexdigest()


def hash_file(root: Path, file: PackFile) -> FileHash:
    """The hash of one file of the folder ``root``, read without following a link."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    fd = os.open(root / file.path, flags)
    hasher = hashlib.sha256()
    try:
        while chunk := os.read(fd, _CHUNK):
            hasher.update(chunk)
    finally:
        os.close(fd)
    return FileHash(file.path, file.mode, hasher.hexdigest())


def hash_folder(root: Path, limits: Limits) -> list[FileHash]:
    """The hashed files of the pack folder ``root`` (its checks as :func:`walk_folder`)."""
    return [hash_file(root, f) for f in walk_folder(root, limits)]


def digest_folder(root: Path, limits: Limits | None = None) -> str:
    """The digest of the pack folder ``root``; UnsafePack when it holds what no pack may."""
    return digest_of(hash_folder(root, limits or Limits()))


def is_digest(text: object) -> bool:
    """True for a well-formed digest (``sha256:`` and 64 lowercase hex digits)."""
    return isinstance(text, str) and DIGEST_RE.fullmatch(text) is not None
