"""Path and environment safety: containment under an allow-list root, env allow-lists, what
identifies an entry file (its fingerprint, its content digest), and the store files this process
holds open (which nothing but the store may ever open).

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

import ctypes
import errno
import functools
import hashlib
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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
    """Resolve every symlink, like Go's ``filepath.EvalSymlinks`` (strict: must exist).

    Through the C library's ``realpath(3)`` when it can be called (a few µs, where
    ``os.path.realpath`` spends 15-20 µs in Python on a path of five parts: this runs before
    every spawn and for every skill loaded); otherwise, or for a path longer than ``PATH_MAX``,
    ``os.path.realpath``. Errors are the same ``OSError``s (``FileNotFoundError`` when a part is
    missing) and ``ValueError`` for a NUL byte.
    """
    resolve = _libc_realpath()
    if resolve is not None:
        raw = os.fsencode(path)
        if 0 in raw:  # the byte as an int: `b"\0" in` raises and formats a TypeError first
            raise ValueError("embedded null byte")
        buffer = ctypes.create_string_buffer(_PATH_MAX)
        found = resolve(raw, buffer)
        if found is not None:
            return os.fsdecode(found)
        err = ctypes.get_errno()
        if err != errno.ENAMETOOLONG:
            raise OSError(err, os.strerror(err), path)  # ENOENT makes a FileNotFoundError
    return os.path.realpath(path, strict=True)


_PATH_MAX = 4096


@functools.cache
def _libc_realpath() -> Callable[[bytes, Any], bytes | None] | None:
    if os.name != "posix":
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).realpath
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    fn.restype = ctypes.c_char_p
    return fn


#: Suffixes of the files SQLite keeps beside a database (the database itself is "").
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")

# Process-wide on purpose: SQLite's POSIX locks belong to the process, not to a descriptor, so
# one open() + close() of the database file *anywhere* in the process silently drops them all
# (another process then believes it is the last user and deletes the WAL under us). The store
# records here every database file it opens; the file built-ins refuse them, whatever settings.
_STORE_FILES: set[str] = set()
_STORE_FILES_LOCK = threading.Lock()


def register_store_file(path: str) -> None:
    """Record a database file (and so its SQLite companions) the store of this process opened."""
    with _STORE_FILES_LOCK:
        _STORE_FILES.update(os.path.abspath(path) + suffix for suffix in SQLITE_COMPANIONS)


def store_files() -> frozenset[str]:
    """Every store file of this process (absolute paths, companions included)."""
    with _STORE_FILES_LOCK:
        return frozenset(_STORE_FILES)


def child_env(allow: Iterable[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The exact environment of a child: only the allowed names that are set in ``environ``."""
    return {name: environ[name] for name in allow if name in environ}


Fingerprint = tuple[int, int, int, int, int]


def fingerprint(st: os.stat_result) -> Fingerprint:
    """What identifies a file's content cheaply: device, inode, size, mtime and ctime.

    The ctime is what makes it trustworthy: ``utime`` (``touch -r``) puts an mtime back after an
    in-place rewrite of the same length, but every write and every ``utime`` sets the ctime to
    the current time, and no system call sets it to anything else.
    """
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


#: SHA-256 of file contents already read, by fingerprint (bounded; oldest dropped first).
_DIGESTS: dict[Fingerprint, str] = {}
_DIGESTS_MAX = 4096
_DIGESTS_LOCK = threading.Lock()
_READ_CHUNK = 1024 * 1024


def content_digest(path: str, expected: Fingerprint) -> str | None:
    """SHA-256 (hex) of the file at ``path`` when it is still the file ``expected`` fingerprints.

    None when it is not (rewritten, replaced, removed) or cannot be read. Each call costs one
    ``stat``; the bytes are read once per fingerprint, later calls are a dictionary look-up,
    because the same (dev, inode, size, mtime, ctime) cannot hold other bytes short of a clock
    set back by root.
    """
    try:
        if fingerprint(os.stat(path)) != expected:
            return None
    except OSError:
        return None
    known = _DIGESTS.get(expected)
    if known is not None:
        return known
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        # fstat before and after reading, on the descriptor read: a write racing the read
        # moves the ctime, and the digest is then not kept.
        if fingerprint(os.fstat(fd)) != expected:
            return None
        digest = hashlib.sha256()
        while chunk := os.read(fd, _READ_CHUNK):
            digest.update(chunk)
        if fingerprint(os.fstat(fd)) != expected:
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    value = digest.hexdigest()
    # Under a lock: another thread adding a digest between iter() and next() would make the
    # eviction raise "dictionary changed size during iteration".
    with _DIGESTS_LOCK:
        if len(_DIGESTS) >= _DIGESTS_MAX:
            _DIGESTS.pop(next(iter(_DIGESTS)), None)
        _DIGESTS[expected] = value
    return value


@dataclass(frozen=True, slots=True)
class EntryCheck:
    """The outcome of checking an entry: its canonical path and fingerprint, or the problem."""

    path: str
    problem: str | None = None
    fingerprint: Fingerprint | None = None


def check_entry(
    entry: str, root: str, shown_root: str | None = None, folder: str | None = None
) -> EntryCheck:
    """Check that ``entry`` (absolute) resolves under canonical ``root`` to a regular executable,
    and under canonical ``folder`` too when given (a SKILL.md's ``exec:`` stays in its folder).

    Messages follow the loader's contract: ``entry X escapes allowlist root R``,
    ``entry X escapes skill folder F``, ``entry X is not executable``, ``entry X does not
    exist``, ``entry X is not a regular file``.
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
    if folder is not None and not is_within(real, folder):
        return EntryCheck(real, f"entry {real} escapes skill folder {folder}")
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


class ExposedKeyFile(PermissionError):
    """A key file that group or others may read (or write): refused, whatever it holds."""


def exposed_key_problem(what: str, path: str, mode: int) -> str | None:
    """Why a key file of this mode is refused, or None: every key file (the audit key, the
    fleet's signing keys, the files of keys they trust) is checked by this one rule, with this
    one message.

    >>> exposed_key_problem("audit key file", "/k", 0o100600) is None
    True
    >>> exposed_key_problem("audit key file", "/k", 0o100644)
    'audit key file /k may be read by group or others (mode 0644); refusing to use it: chmod 600 /k'
    """
    if not mode & 0o077:
        return None
    return (
        f"{what} {path} may be read by group or others (mode {stat.S_IMODE(mode):04o}); "
        f"refusing to use it: chmod 600 {path}"
    )


def read_regular(path: str, limit: int, *, key_file: str | None = None) -> bytes:
    """Read at most ``limit`` bytes of a regular file, never blocking on a FIFO or device.

    Raises NotRegularFile for anything but a regular file, OSError when it cannot be read.
    ``key_file`` (what the file is, e.g. ``"audit key file"``): the file must be private to its
    owner, else :class:`ExposedKeyFile` (:func:`exposed_key_problem`); checked on the file
    opened, not on a path that could be swapped meanwhile.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile("not a regular file")
        if key_file is not None:
            problem = exposed_key_problem(key_file, path, st.st_mode)
            if problem is not None:
                raise ExposedKeyFile(problem)
        # Sized by fstat: one read of the file's size and a byte more (which shows a file that
        # grew meanwhile), not a buffer of ``limit`` bytes allocated for every small file.
        want = min(limit, st.st_size + 1)
        data = os.read(fd, want)
        if len(data) < want or len(data) == limit:
            return data
        return data + read_up_to(fd, limit - len(data))
    finally:
        os.close(fd)


def read_up_to(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from ``fd`` (fewer at end of file), read in as few calls as the
    kernel allows."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def create_private_file(path: str, content: bytes) -> bool:
    """Write ``content`` to a new file of mode 0600 at ``path``, atomically: a process racing
    us reads either no file or the whole of it. False when another process created it first
    (theirs is kept). Used for the keys the manager makes itself (audit, credentials)."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True
