"""The files of a pack: which paths are allowed, the limits, and the walk of a pack folder.

A pack is a tree of regular files and folders, nothing else. One set of rules serves a folder
on disk and the entries of an archive (:mod:`ongrid_skills.packs.unpack`), so a pack is the
same pack in every form:

- a path is relative, ``/``-separated, valid UTF-8, without control characters or ``\\``,
  without a ``..`` component (``.`` and empty components are dropped), each component at most
  255 bytes;
- no two paths may differ only by letter case (or Unicode normalisation): the pack must unpack
  to the same files on a case-insensitive filesystem;
- links (symbolic or hard), devices, FIFOs and sockets are refused, wherever they point;
- the mode of a file is normalised to ``755`` when its owner may execute it, else ``644``
  (setuid, setgid, sticky and group/other bits are dropped);
- at most ``Limits.max_files`` entries and ``Limits.max_bytes`` bytes of file content.

Two things are not part of a pack: the signature file ``pack.sig`` at the pack's root (it
travels with the pack but is excluded from the digest) and anything under a ``.git`` folder,
which is never unpacked, copied, digested or installed.

>>> clean_path("./skills//probe/SKILL.md")
'skills/probe/SKILL.md'
>>> clean_path("a/../../etc/passwd")
Traceback (most recent call last):
...
ongrid_skills.errors.UnsafePack: unsafe pack: a/../../etc/passwd: a '..' component leaves the pack

This module only reads; it must never follow a link, open a FIFO or write anything.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ongrid_skills.errors import UnsafePack
from ongrid_skills.settings import Settings

SIGNATURE_FILE = "pack.sig"
EXCLUDED_DIRS = frozenset({".git"})
EXECUTABLE, REGULAR = 0o755, 0o644
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 4096
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one pack may hold once unpacked (``ONGRID_PACK_MAX_FILES``,
    ``ONGRID_PACK_MAX_UNPACKED_BYTES``)."""

    max_files: int = 10_000
    max_bytes: int = 200 * 1024 * 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(settings.pack_max_files, settings.pack_max_unpacked_bytes)


@dataclass(frozen=True, slots=True)
class PackFile:
    """One file of a pack: its clean relative path, normalised mode (755/644) and size."""

    path: str
    mode: int
    size: int


def normal_mode(mode: int) -> int:
    """``755`` when the owner may execute, else ``644``: every other bit is dropped."""
    return EXECUTABLE if mode & stat.S_IXUSR else REGULAR


def clean_path(name: str) -> str:
    """The relative path an entry named ``name`` stands for; UnsafePack when it may not be.

    ``""`` means the pack's root itself (``./``), which holds nothing of its own.
    """
    shown = _shown(name)
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePack(shown, "the name is not valid UTF-8") from None
    if _CONTROL_RE.search(name):
        raise UnsafePack(shown, "the name holds a control character")
    if "\\" in name:
        raise UnsafePack(shown, "the name holds a backslash")
    if name.startswith("/"):
        raise UnsafePack(shown, "absolute path")
    if len(encoded) > MAX_PATH_BYTES:
        raise UnsafePack(shown[:200] + "…", f"the path is over {MAX_PATH_BYTES} bytes")
    parts = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise UnsafePack(shown, "a '..' component leaves the pack")
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafePack(shown, f"a name is over {MAX_COMPONENT_BYTES} bytes")
        parts.append(part)
    return "/".join(parts)


def is_ignored(path: str) -> bool:
    """True for what is never unpacked, copied or installed: anything under a ``.git`` folder."""
    return any(part in EXCLUDED_DIRS for part in path.split("/"))


def is_excluded(path: str) -> bool:
    """True for what the digest leaves out: the root's ``pack.sig`` and what is ignored."""
    return path == SIGNATURE_FILE or is_ignored(path)


def fold(path: str) -> str:
    """The form two paths share when a case-insensitive filesystem would confuse them."""
    return unicodedata.normalize("NFC", path).casefold()


class PathSet:
    """The paths seen so far of one pack: refuses duplicates, case-only differences, a file
    where a folder is (or the reverse), and more entries than the limit allows."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        # folded path → [path, "file" | "dir", whether an entry named it (not only a child)]
        self._seen: dict[str, list[object]] = {}
        self.entries = 0

    def add(self, path: str, kind: str) -> None:
        """Record ``path`` (clean, not empty) as a ``file`` or a ``dir``."""
        self.entries += 1
        if self.entries > self.limits.max_files:
            raise UnsafePack(path, f"more than {self.limits.max_files} entries")
        parts = path.split("/")
        for depth in range(1, len(parts)):  # every parent is (implicitly) a folder
            self._claim("/".join(parts[:depth]), "dir", explicit=False)
        self._claim(path, kind, explicit=True)

    def _claim(self, path: str, kind: str, *, explicit: bool) -> None:
        key = fold(path)
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = [path, kind, explicit]
            return
        seen_path, seen_kind, seen_explicit = seen
        if seen_path != path:
            raise UnsafePack(
                path, f"differs from {seen_path!r} only by letter case or Unicode form"
            )
        if seen_kind != kind:
            raise UnsafePack(path, "is both a file and a folder")
        if explicit and seen_explicit:
            raise UnsafePack(path, "duplicate entry")
        seen[2] = seen_explicit or explicit


def walk_folder(root: Path, limits: Limits, *, signature: bool = False) -> list[PackFile]:
    """Every file of the pack folder ``root``, sorted by path; UnsafePack on a link, a special
    file, a bad name or a limit. ``.git`` folders are left out, and so is the root's
    ``pack.sig`` unless ``signature`` (copying a pack keeps it; its digest does not)."""
    paths = PathSet(limits)
    found: list[PackFile] = []
    total = 0
    stack = [""]
    while stack:
        relative = stack.pop()
        try:
            with os.scandir(root / relative if relative else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise UnsafePack(relative or ".", f"cannot list: {exc.strerror or exc}") from None
        subdirs = []
        for entry in entries:
            path = clean_path(f"{relative}/{entry.name}" if relative else entry.name)
            if is_ignored(path) or (path == SIGNATURE_FILE and not signature):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:  # removed while the folder was walked
                raise UnsafePack(path, f"cannot read: {exc.strerror or exc}") from None
            if stat.S_ISDIR(st.st_mode):
                paths.add(path, "dir")
                subdirs.append(path)
            elif stat.S_ISREG(st.st_mode):
                paths.add(path, "file")
                total += st.st_size
                if total > limits.max_bytes:
                    raise UnsafePack(path, f"more than {limits.max_bytes} bytes of files")
                found.append(PackFile(path, normal_mode(st.st_mode), st.st_size))
            else:
                raise UnsafePack(path, f"{special_kind(st.st_mode)}: only files and folders")
        stack.extend(reversed(subdirs))
    found.sort(key=lambda f: f.path.encode("utf-8"))
    return found


def special_kind(mode: int) -> str:
    """What a non-regular, non-folder entry is, in words."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _shown(name: str) -> str:
    """``name`` printable in a message: control characters and bad bytes escaped."""
    text = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


@contextmanager
def replacing(target: Path) -> Iterator[BinaryIO]:
    """A new file, written in the block, that replaces ``target`` (mode 644) in one rename when
    the block ends; when the block fails it is removed and ``target`` is left as it was."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
