"""``tail_file`` and ``disk_usage``: read-only looks at files and file systems.

``tail_file`` reads a file from its end, block by block, and stops as soon as it has the asked
number of lines or has read ``max_bytes``: a 50 GiB log costs one or two small reads. Only regular
files are read, and a device is never opened (opening some devices has side effects).

What may be read is the operator's (:class:`~ongrid_skills.builtins.reach.Reach`): files whose
canonical path (every symlink resolved) lies under a readable root (``builtin_read_paths``,
default ``/var/log``), never the manager's own files. The file is first opened with ``O_PATH``,
which reads nothing, runs no device driver and — unlike a real open — drops no POSIX lock when
closed; the path it names and its identity are checked on that descriptor, and only then is the
very same file reopened for reading through ``/proc/self/fd`` (no swap possible in between).
``disk_usage`` measures the file system of a path under a readable root, or of a mount point.
The legacy config key ``files.allowed_dirs`` (absolute directories separated by ``:`` or ``,``)
narrows ``tail_file`` further when set.

Lines read are passed through :func:`~ongrid_skills.builtins.redact.redact` (tokens, passwords).
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Annotated, Any

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, ForbiddenPath, Reach
from ongrid_skills.builtins.redact import redact
from ongrid_skills.paths import is_within, split_dir_list

__all__ = ["disk_usage", "tail_file"]

MAX_LINES = 10000
DEFAULT_MAX_BYTES = 1024 * 1024
MAX_MAX_BYTES = 16 * 1024 * 1024
BLOCK_SIZE = 64 * 1024
ALLOWED_DIRS_KEY = "files.allowed_dirs"


def _check_absolute(path: str) -> str:
    if not path:
        raise BuiltinFailure("path is empty")
    if "\x00" in path:
        raise BuiltinFailure("path contains a NUL byte")
    if not os.path.isabs(path):
        raise BuiltinFailure(f"path {path!r} is not absolute")
    return path


def _os_error(path: str, exc: OSError) -> BuiltinFailure:
    if isinstance(exc, FileNotFoundError):
        return BuiltinFailure(f"{path} does not exist")
    if isinstance(exc, PermissionError):
        return BuiltinFailure(f"{path}: permission denied")
    if isinstance(exc, NotADirectoryError):
        return BuiltinFailure(f"{path}: a component of the path is not a directory")
    return BuiltinFailure(f"{path}: {exc.strerror or exc}")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _allowed_roots(ctx: BuiltinContext) -> list[str] | None:
    raw = ctx.config.get(ALLOWED_DIRS_KEY)
    if raw is None or not raw.strip():
        return None
    roots = []
    for entry in split_dir_list(raw):
        if os.path.isabs(entry):
            roots.append(os.path.realpath(entry))
    return roots


def _check_confined(path: str, real: str, reach: Reach, roots: list[str] | None) -> None:
    reach.check_path(path, real)
    if roots is not None and not any(is_within(real, root) for root in roots):
        raise ForbiddenPath(f"{path} is outside the allowed directories ({ALLOWED_DIRS_KEY})")


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_O_PATH: int = getattr(os, "O_PATH", 0)


def _open_checked(path: str, reach: Reach, roots: list[str] | None) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path`` once every check has passed."""
    real = os.path.realpath(path)
    _check_confined(path, real, reach, roots)
    if _O_PATH:
        # Named, not opened (see the module docstring): checked on the descriptor, then reopened.
        handle = os.open(real, _O_PATH | os.O_CLOEXEC)
        try:
            st = os.fstat(handle)
            try:  # the path may have been swapped between realpath() and open()
                named = os.readlink(f"/proc/self/fd/{handle}")
            except OSError:
                named = real
            _check_file(path, named, st, reach, roots)
            try:
                fd = os.open(f"/proc/self/fd/{handle}", _READ_FLAGS)
            except FileNotFoundError:  # no /proc: the checked name, identities compared below
                fd = os.open(named, _READ_FLAGS)
        finally:
            os.close(handle)
    else:  # no O_PATH (not Linux): check by path and identity, then open
        st = os.stat(real)
        _check_file(path, real, st, reach, roots)
        fd = os.open(real, _READ_FLAGS)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise ForbiddenPath(f"{path} changed while it was being opened")
    return fd, opened


def _check_file(
    path: str, real: str, st: os.stat_result, reach: Reach, roots: list[str] | None
) -> None:
    _check_confined(path, real, reach, roots)
    reach.check_identity(path, st)  # a hard link or bind mount of a protected file
    if not stat.S_ISREG(st.st_mode):
        raise BuiltinFailure(f"{path} is {_kind(st.st_mode)}, not a regular file")


def _tail(
    path: str, lines: int, max_bytes: int, reach: Reach, roots: list[str] | None
) -> dict[str, Any]:
    try:
        fd, st = _open_checked(path, reach, roots)
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        size = st.st_size
        pos = size
        blocks: list[bytes] = []
        read = 0
        newlines = 0
        trailing_newline: bool | None = None
        limited_by: str | None = None
        while pos > 0:
            if read >= max_bytes:
                limited_by = "max_bytes"
                break
            want = min(BLOCK_SIZE, pos, max_bytes - read)
            try:
                chunk = os.pread(fd, want, pos - want)
            except OSError as exc:
                raise _os_error(path, exc) from None
            if not chunk:  # the file shrank under us: stop with what we have
                break
            pos -= len(chunk)
            read += len(chunk)
            blocks.append(chunk)
            if trailing_newline is None:
                trailing_newline = chunk.endswith(b"\n")
            newlines += chunk.count(b"\n")
            # `lines` complete lines need `lines` separators before them (+1 if the file ends
            # with a newline, which terminates the last line rather than separating).
            if newlines >= lines + (1 if trailing_newline else 0):
                limited_by = "lines"
                break
    finally:
        os.close(fd)

    data = b"".join(reversed(blocks))
    if data.endswith(b"\n"):
        data = data[:-1]
    pieces = data.split(b"\n") if data else []
    at_start = pos == 0
    partial_first = False
    if not at_start and pieces:
        if len(pieces) > lines:
            pieces = pieces[-lines:]
        elif len(pieces) > 1:
            pieces = pieces[1:]  # the first piece began before what was read
        else:
            partial_first = True  # one line longer than max_bytes: its end only
    truncated = not at_start or len(pieces) > lines
    pieces = pieces[-lines:]
    out = [redact(piece.decode("utf-8", errors="replace").removesuffix("\r")) for piece in pieces]
    result: dict[str, Any] = {
        "path": path,
        "lines": out,
        "line_count": len(out),
        "truncated": truncated,
        "size": size,
        "bytes_read": read,
    }
    if truncated:
        result["limited_by"] = limited_by or "lines"
    if partial_first:
        result["partial_first_line"] = True
    return result


async def tail_file(
    ctx: BuiltinContext,
    path: Annotated[str, Field(description="Absolute path of a regular file.", min_length=1)],
    lines: Annotated[
        int, Field(description="How many lines from the end to return.", ge=1, le=MAX_LINES)
    ] = 100,
    max_bytes: Annotated[
        int,
        Field(
            description="Most bytes to read from the end of the file.",
            ge=1,
            le=MAX_MAX_BYTES,
        ),
    ] = DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """The last ``lines`` lines of a file, reading at most ``max_bytes`` from its end."""
    path = _check_absolute(path)
    if not 1 <= lines <= MAX_LINES:
        raise BuiltinFailure(f"lines must be within 1..{MAX_LINES}")
    if not 1 <= max_bytes <= MAX_MAX_BYTES:
        raise BuiltinFailure(f"max_bytes must be within 1..{MAX_MAX_BYTES}")
    return await asyncio.to_thread(_tail, path, lines, max_bytes, ctx.reach, _allowed_roots(ctx))


def _mount_point(path: str) -> str:
    current = os.path.realpath(path)
    while not os.path.ismount(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def _usage(path: str, reach: Reach) -> dict[str, Any]:
    reach.check_path(path, os.path.realpath(path), mount_points=True)
    try:
        vfs = os.statvfs(path)
        mount = _mount_point(path)
    except OSError as exc:
        raise _os_error(path, exc) from None
    frsize = vfs.f_frsize or vfs.f_bsize
    total = vfs.f_blocks * frsize
    free = vfs.f_bfree * frsize
    available = vfs.f_bavail * frsize
    used = total - free
    # As df(1): the share of the space usable by unprivileged users that is used.
    usable = used + available
    used_percent = round(used * 100 / usable, 2) if usable else 0.0
    inodes_used = vfs.f_files - vfs.f_ffree
    return {
        "path": path,
        "mount_point": mount,
        "total_bytes": total,
        "used_bytes": used,
        "free_bytes": free,
        "available_bytes": available,
        "used_percent": used_percent,
        "inodes_total": vfs.f_files,
        "inodes_free": vfs.f_ffree,
        "inodes_used_percent": round(inodes_used * 100 / vfs.f_files, 2) if vfs.f_files else 0.0,
        "read_only": bool(vfs.f_flag & os.ST_RDONLY),
    }


async def disk_usage(
    ctx: BuiltinContext,
    path: Annotated[
        str,
        Field(description="Absolute path on the file system to measure.", min_length=1),
    ] = "/",
) -> dict[str, Any]:
    """Size, use and free space (bytes and inodes) of the file system holding ``path``."""
    path = _check_absolute(path)
    return await asyncio.to_thread(_usage, path, ctx.reach)
