"""Linux Landlock from Python: the kernel's ABI version, and what a child's ruleset is made of.

The parent builds a ruleset (``landlock_create_ruleset`` + one ``landlock_add_rule`` per path,
in one call of the spawn helper's ``ongrid_landlock_ruleset``) and hands its descriptor to the
spawn helper, whose child calls ``landlock_restrict_self`` just before ``execve``
(``spawn_helper.c``). Building a ruleset does
not restrict the process that builds it. Only the access rights the kernel's ABI knows are
handled; what is handled and not allowed by a rule is denied to the child and everything it
starts, whatever its user (root too).

ABI history used here: 1 filesystem, 2 ``REFER``, 3 ``TRUNCATE``, 4 TCP bind/connect,
5 ``IOCTL_DEV``, 6 scoping of signals and abstract Unix sockets. Ptrace of a process outside the
child's domain is denied by Landlock itself from ABI 1 (reading its ``/proc/<pid>/environ`` is
not, on 6.18: measured; the profiles' rules keep those files out).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import stat
import struct
import sys

# x86_64 and aarch64 (and every architecture added since 5.13) share these numbers.
_CREATE = 444
_VERSION_FLAG = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

#: Rights that apply to a file (a rule on a file may hold only these).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
#: Read a tree and run what is in it.
READ = EXECUTE | READ_FILE | READ_DIR
#: Read, write, create and remove in a tree (no device nodes).
WRITE = (
    READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
#: Read and write one device file (``/dev/null``…).
DEVICE = READ_FILE | WRITE_FILE


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


@functools.cache
def abi() -> int:
    """The kernel's Landlock ABI version; 0 when there is no Landlock (or it is disabled)."""
    libc = _libc()
    if libc is None:
        return 0
    found = int(libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG)))
    return max(found, 0)


def handled(network: bool, version: int | None = None) -> tuple[bytes, int]:
    """The ``landlock_ruleset_attr`` of a ruleset for this kernel (every filesystem right it
    knows; TCP bind/connect unless ``network``; signals and abstract Unix sockets scoped from
    ABI 6), and the filesystem rights it handles."""
    version = abi() if version is None else version
    fs_rights = _fs_rights(version)
    net = 0 if network else NET_BIND_TCP | NET_CONNECT_TCP
    if version >= 6:
        return struct.pack("QQQ", fs_rights, net, SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL), fs_rights
    if version >= 4:
        return struct.pack("QQ", fs_rights, net), fs_rights
    return struct.pack("Q", fs_rights), fs_rights


def open_rule(path: str, rights: int, fs_rights: int) -> tuple[int, int] | None:
    """An ``O_PATH`` descriptor of ``path`` and the rights a rule on it may hold (a file's
    rule only file rights); None when there is no such path. The caller closes the fd."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    return fd, rights & (fs_rights if is_dir else fs_rights & FILE_RIGHTS)


__all__ = ["DEVICE", "FILE_RIGHTS", "READ", "READ_DIR", "WRITE", "abi", "handled", "open_rule"]
