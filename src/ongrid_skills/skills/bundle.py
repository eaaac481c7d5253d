"""The files a SKILL.md skill ships beside it: listed, read one at a time, confined to its folder.

A skill's folder is the canonical folder of its SKILL.md (``Skill.base_dir``). Claude Code gives
the model that folder; openclaw substitutes ``{baseDir}`` in the body. Here:

- :func:`list_files` walks the folder (sorted, depth first): symlinked folders are not entered,
  hidden entries (``.git``, ``.env``…) and nested skill folders (their own SKILL.md) are left
  out, at most :data:`MAX_LISTED_FILES` files are listed (``truncated`` says when more exist);
- :func:`read_file` resolves every symlink of ``folder/relative`` and refuses, with a typed error
  (:class:`~ongrid_skills.errors.BundledFileError`), a path that is absolute or resolves outside
  the folder or to a hidden name (``outside_skill``), does not exist (``file_not_found``), is
  not a regular file (``not_a_file``), is over :data:`MAX_FILE_BYTES` (``file_too_large``) or
  is not UTF-8 text (``binary_file``);
- :func:`substitute` turns ``{baseDir}`` (openclaw) and ``${CLAUDE_SKILL_DIR}`` (Claude Code)
  into the folder.

It must never read outside the folder, never block on a FIFO, never read past the cap.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ongrid_skills.errors import (
    BinaryFile,
    BundledFileMissing,
    BundledFileTooLarge,
    NotAFile,
    OutsideSkill,
)
from ongrid_skills.paths import is_within, read_up_to

MAX_FILE_BYTES = 256 * 1024
MAX_LISTED_FILES = 200
MAX_LISTED_DIRS = 500  # folders visited by one listing: a huge tree costs a bounded walk
PLACEHOLDERS = ("{baseDir}", "${CLAUDE_SKILL_DIR}")


@dataclass(frozen=True, slots=True)
class BundledFile:
    """One file of a skill's folder: its path relative to the folder, its size in bytes."""

    path: str
    size: int

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "size": self.size}


@dataclass(frozen=True, slots=True)
class FileText:
    """A bundled file as read: its relative path, size and text."""

    path: str
    size: int
    text: str


def is_skill_file(name: str) -> bool:
    """``SKILL.md`` in any letter case (``skill.md`` loads too)."""
    return name.lower() == "skill.md"


def substitute(text: str, folder: str) -> str:
    """``{baseDir}`` and ``${CLAUDE_SKILL_DIR}`` replaced by the skill's folder."""
    for placeholder in PLACEHOLDERS:
        text = text.replace(placeholder, folder)
    return text


def list_files(folder: str) -> tuple[list[BundledFile], bool]:
    """(files of the folder but its own SKILL.md, whether the list was cut)."""
    found: list[BundledFile] = []
    visited = 0
    stack = [""]
    while stack:
        relative = stack.pop()
        visited += 1
        if visited > MAX_LISTED_DIRS:
            return found, True
        try:
            with os.scandir(os.path.join(folder, relative)) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        if relative and any(is_skill_file(e.name) for e in entries):
            continue  # a nested skill folder: its files are its own skill's
        subdirs = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = f"{relative}/{entry.name}" if relative else entry.name
            if not relative and is_skill_file(entry.name):
                continue
            size = _listable(entry, folder)
            if size == -1:
                subdirs.append(path)
            elif size is not None:
                if len(found) >= MAX_LISTED_FILES:
                    return found, True
                found.append(BundledFile(path, size))
        stack.extend(reversed(subdirs))
    return found, False


def _listable(entry: os.DirEntry[str], folder: str) -> int | None:
    """The size of a listable file, -1 for a folder to enter, None for anything else."""
    try:
        if entry.is_symlink():
            real = os.path.realpath(entry.path)
            if not is_within(real, folder):
                return None
            st = os.stat(real)
            return st.st_size if stat.S_ISREG(st.st_mode) else None
        if entry.is_dir(follow_symlinks=False):
            return -1
        if entry.is_file(follow_symlinks=False):
            return entry.stat(follow_symlinks=False).st_size
    except OSError:
        return None
    return None


def read_file(folder: str, relative: str) -> FileText:
    """The text of ``folder/relative``; ``folder`` is canonical. Raises a BundledFileError."""
    if not relative or "\0" in relative:
        raise BundledFileMissing("give the path of a file in the skill's folder")
    if os.path.isabs(relative):
        raise OutsideSkill(f"{relative!r} is absolute: give a path relative to the skill's folder")
    normal = os.path.normpath(relative)
    if normal == ".." or normal.startswith("../"):
        raise OutsideSkill(f"{relative!r} leaves the skill's folder")
    if _hidden(normal):
        raise OutsideSkill(f"{relative!r} is hidden: hidden files are not part of a skill")
    real = os.path.realpath(os.path.join(folder, normal))
    if not is_within(real, folder):
        raise OutsideSkill(f"{relative!r} resolves outside the skill's folder")
    if real != folder and _hidden(os.path.relpath(real, folder)):
        raise OutsideSkill(f"{relative!r} resolves to a hidden file")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise BundledFileMissing(f"no file {normal!r} in the skill's folder") from None
    except OSError as exc:
        raise NotAFile(f"{normal!r} cannot be opened: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise NotAFile(f"{normal!r} is {what}")
        _still_inside(fd, folder, normal)
        if st.st_size > MAX_FILE_BYTES:
            raise BundledFileTooLarge(
                f"{normal!r} is {st.st_size} bytes, over the {MAX_FILE_BYTES}-byte cap"
            )
        raw = read_up_to(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:  # it grew since fstat
        raise BundledFileTooLarge(f"{normal!r} is over the {MAX_FILE_BYTES}-byte cap")
    if b"\0" in raw:
        raise BinaryFile(f"{normal!r} is a binary file (it holds NUL bytes): not text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BinaryFile(
            f"{normal!r} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None
    return FileText(normal, len(raw), text)


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") and part not in (".", "..") for part in relative.split("/"))


def _still_inside(fd: int, folder: str, shown: str) -> None:
    """What was opened is inside the folder: a component swapped for a symlink between the
    resolution and the open is caught where the kernel tells (Linux's /proc/self/fd)."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return
    if not is_within(opened, folder):
        raise OutsideSkill(f"{shown!r} resolves outside the skill's folder")
