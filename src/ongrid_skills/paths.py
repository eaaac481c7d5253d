"""Path and environment safety: containment under an allow-list root, env allow-lists.

>>> is_within("/etc/ongrid/skills/a/run.sh", "/etc/ongrid/skills")
True
>>> is_within("/etc/ongrid/skills-evil/run.sh", "/etc/ongrid/skills")
False
>>> is_within("/", "/")
True
>>> split_dir_list(" /a: /b ,, /c ")
['/a', '/b', '/c']
>>> child_env(["HOME", "NOPE_NOT_SET_X"], {"HOME": "/root", "PATH": "/bin"})
{'HOME': '/root'}
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def split_dir_list(value: str) -> list[str]:
    """Split an ``ONGRID_*_DIRS`` value on ``:`` and ``,``; blanks dropped, spaces trimmed."""
    return [part.strip() for part in re.split(r"[:,]", value) if part.strip()]


def is_within(path: str, root: str) -> bool:
    """True when ``path`` equals ``root`` or lies below it (both already canonical)."""
    if path == root:
        return True
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path.startswith(prefix)


def canonical(path: str) -> str:
    """Resolve every symlink, like Go's ``filepath.EvalSymlinks`` (strict: must exist)."""
    return os.path.realpath(path, strict=True)


def child_env(allow: Iterable[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The exact environment of a child: only the allowed names that are set in ``environ``."""
    return {name: environ[name] for name in allow if name in environ}


Fingerprint = tuple[int, int, int, int]


def fingerprint(st: os.stat_result) -> Fingerprint:
    """What identifies a file's content cheaply: device, inode, size, modification time."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class EntryCheck:
    """The outcome of checking an entry: its canonical path and fingerprint, or the problem."""

    path: str
    problem: str | None = None
    fingerprint: Fingerprint | None = None


def check_entry(entry: str, root: str, shown_root: str | None = None) -> EntryCheck:
    """Check that ``entry`` (absolute) resolves under canonical ``root`` to a regular executable.

    Messages follow the loader's contract: ``entry X escapes allowlist root R``,
    ``entry X is not executable``, ``entry X does not exist``, ``entry X is not a regular file``.
    """
    shown = shown_root or root
    try:
        real = canonical(entry)
    except FileNotFoundError:
        return EntryCheck(entry, f"entry {entry} does not exist")
    except OSError as exc:
        return EntryCheck(entry, f"entry {entry} cannot be resolved: {exc.strerror or exc}")
    except ValueError as exc:  # a NUL byte or a lone surrogate: no file can have that name
        return EntryCheck(entry, f"entry {entry!r} is not a valid path: {exc}")
    if not is_within(real, root):
        shown_entry = real if real != entry else entry
        return EntryCheck(real, f"entry {shown_entry} escapes allowlist root {shown}")
    try:
        st = os.stat(real)
    except OSError as exc:
        return EntryCheck(real, f"entry {entry} cannot be read: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        return EntryCheck(real, f"entry {entry} is not a regular file")
    if not (st.st_mode & 0o111) or not os.access(real, os.X_OK):
        return EntryCheck(real, f"entry {entry} is not executable")
    return EntryCheck(real, fingerprint=fingerprint(st))


class NotRegularFile(OSError):
    """The path names a FIFO, device, socket or directory, not a regular file."""


def read_regular(path: str, limit: int) -> bytes:
    """Read at most ``limit`` bytes of a regular file, never blocking on a FIFO or device.

    Raises NotRegularFile for anything but a regular file, OSError when it cannot be read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            chunk = os.read(fd, limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
