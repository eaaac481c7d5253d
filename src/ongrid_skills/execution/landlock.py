"""Linux Landlock from Python: the kernel's ABI version, and rulesets built for a child.

The parent builds a ruleset (``landlock_create_ruleset`` + one ``landlock_add_rule`` per path
or port) and hands its descriptor to the spawn helper, whose child calls
``landlock_restrict_self`` just before ``execve`` (``spawn_helper.c``). Building a ruleset does
not restrict the process that builds it. Only the access rights the kernel's ABI knows are
handled; what is handled and not allowed by a rule is denied to the child and everything it
starts, whatever its user (root too).

ABI history used here: 1 filesystem, 2 ``REFER``, 3 ``TRUNCATE``, 4 TCP bind/connect,
5 ``IOCTL_DEV``, 6 scoping of signals and abstract Unix sockets. Ptrace (and so
``/proc/<pid>/environ``, ``/proc/<pid>/mem``) of a process outside the child's domain is denied
by Landlock itself from ABI 1.
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
_CREATE, _ADD_RULE = 444, 445
_VERSION_FLAG = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2

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


def _fail(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


class Ruleset:
    """One ruleset being built; :attr:`fd` goes to the spawn helper, then :meth:`close`."""

    def __init__(self, *, network: bool, scoped: bool = True) -> None:
        """``network``: False handles (and so denies) TCP bind and connect; ``scoped``: deny
        signals to, and abstract Unix sockets of, processes outside the domain (ABI 6)."""
        libc = _libc()
        version = abi()
        if libc is None or version < 1:
            raise OSError(0, "Landlock is not available on this kernel")
        self.abi = version
        self.fs_rights = _fs_rights(version)
        net = 0 if network else NET_BIND_TCP | NET_CONNECT_TCP
        scope = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if scoped and version >= 6 else 0
        if version >= 6:
            attr = struct.pack("QQQ", self.fs_rights, net, scope)
        elif version >= 4:
            attr = struct.pack("QQ", self.fs_rights, net)
        else:
            attr = struct.pack("Q", self.fs_rights)
        self._libc = libc
        buf = ctypes.create_string_buffer(attr, len(attr))
        fd = int(libc.syscall(_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)))
        if fd < 0:
            raise _fail("landlock_create_ruleset")
        self.fd = fd

    def allow_fd(self, fd: int, rights: int, is_dir: bool) -> None:
        """Allow ``rights`` beneath the file or folder open at ``fd`` (``O_PATH``)."""
        rights &= self.fs_rights if is_dir else self.fs_rights & FILE_RIGHTS
        if not rights:
            return
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        if self._libc.syscall(_ADD_RULE, self.fd, _RULE_PATH_BENEATH, attr, 0) != 0:
            raise _fail("landlock_add_rule")

    def allow_path(self, path: str, rights: int) -> bool:
        """Allow ``rights`` beneath ``path``; False when there is no such path."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            self.allow_fd(fd, rights, stat.S_ISDIR(os.fstat(fd).st_mode))
        finally:
            os.close(fd)
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


__all__ = ["DEVICE", "FILE_RIGHTS", "READ", "READ_DIR", "WRITE", "Ruleset", "abi"]
