"""Starting a skill's child process: the spawn helper (C, through ctypes) or ``subprocess``.

Both spawners start ``argv = [entry]`` in a new session, cwd = the skill's folder, with exactly
the environment given, stdin/stdout/stderr on fresh pipes and every other descriptor closed; then
write as much of the payload to stdin as the pipe takes without blocking (closing stdin once it
is all written); the helper also puts stdout, stderr and the pidfd under the watch of the epoll
it is given (the fallback leaves that to the runner's poller).
They hand back a :class:`Child`: its pid, the parent's ends of the pipes (non-blocking), a pidfd,
how much was written and whether the descriptors are watched. Doing all of this in one C call is
most of what the helper saves: every Python statement between the spawn and the loop's next wait
delays the child, which starts on the same core.

- :class:`HelperSpawner` calls ``ongrid_spawn`` of ``spawn_helper.c`` (the child cloned with
  ``CLONE_VM | CLONE_VFORK`` as ``posix_spawn`` does, its handled signals read from
  ``/proc/self/status`` rather than asked one by one): about half the parent CPU of ``Popen``.
  Asked to (``check``), it re-checks the entry first (``call_helper.c``: no symlink on its path,
  a regular executable file) and spawns nothing, raising :class:`EntryUnverified`, when that does
  not pass; at the call's exit :meth:`HelperSpawner.collect` drains, kills, reaps and closes in
  one C call. The library (both files) is compiled on first use with the system's ``cc`` and
  cached (:mod:`ongrid_skills.execution.helper_library`); it is loaded only from a directory and
  file owned by this user (or root) that nobody else can write. A confined call (a
  sandbox profile) goes through ``ongrid_spawn_confined``, whose child also applies the Landlock
  ruleset, rlimits and ``no_new_privs`` before ``execve``
  (:mod:`ongrid_skills.execution.confine`).
- :class:`PopenSpawner` is the pure-Python fallback (``subprocess.Popen``), used when there is
  no compiler, off Linux, or when ``ONGRID_SPAWN_HELPER=off`` forces it. It confines nothing:
  the runner refuses a confined call (``sandbox_unavailable``) rather than run it through this
  path.

Which one a runner uses is decided once per process and mode (:func:`spawner`); why the helper
is unavailable is logged once at INFO. :class:`~ongrid_skills.execution.spawn_pool.SpawnPool`
runs spawns in worker threads, for a runner that has other calls in flight.

This module must never run anything but the compiler before a call is admitted
(:mod:`ongrid_skills.execution.helper_library` builds and loads the helper's library).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from ongrid_skills.execution import helper_library
from ongrid_skills.execution.reaping import (
    after_exit,
    exits_within,
    reap,
    reap_by_pidfd,
    wait_no_reap,
)

LOG = logging.getLogger("ongrid_skills.runner")
CHECK_ENTRY = 1  # ongrid_spawn's flags (spawn_helper.c)
WATCH_PIDFD = 2
WATCHED_ALL = 1  # Child.watched: stdout, stderr and the pidfd were added to the epoll given
WATCHED_PIDFD = 2  # the pidfd alone (a quiet start)
WATCHED_TIMED = 3  # the pidfd alone, and the quiet start's timer given armed
_COLLECT_BYTES = 65536  # per pipe and collect: a pipe's default capacity
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
ENV_SWITCH = "ONGRID_SPAWN_HELPER"  # "off" (or 0/false/no): always use subprocess

Mode = Literal["auto", "helper", "subprocess"]


class EntryUnverified(Exception):
    """The helper's fast entry re-check did not pass: nothing was spawned; the caller runs the
    full check (which says why, or passes: a symlink on the way to an entry still inside)."""


#: What :meth:`HelperSpawner.collect` found: stdout and stderr read, whether each pipe reached
#: EOF (and was closed), whether the child was reaped (group killed, record slot cleared,
#: pidfd closed) and its return code (None: unknown).
Collected = tuple[bytes, bytes, bool, bool, bool, "int | None"]


@dataclass(slots=True)
class Child:
    """A started child: its pid, the parent's pipe ends (non-blocking; stdin None once all of
    the payload was written and it was closed), a pidfd or None, how many bytes of the payload
    were written, and what was added to the epoll given (0 nothing, ``WATCHED_ALL``,
    ``WATCHED_PIDFD``)."""

    pid: int
    stdin: int | None
    stdout: int
    stderr: int
    pidfd: int | None
    written: int
    watched: int
    # Kept for the fallback only: a Popen dropped while its returncode is None would be queued
    # for subprocess's own reaping, which must never reap a call's leader before the runner.
    popen: subprocess.Popen[bytes] | None = None
    # The helper's: the whole end of the call in one C call (see HelperSpawner.collect).
    helper: HelperSpawner | None = None

    def reaped(self, returncode: int | None) -> None:
        """The runner reaped the child: tell the Popen object, if any, that it is done."""
        if self.popen is not None:
            self.popen.returncode = returncode


class Spawner(Protocol):
    """Starts one child; raises OSError when it cannot be started (nothing left behind).

    ``quiet``: add only the pidfd to ``epoll_fd``, and arm ``timer`` (a :meth:`quiet_timer`)
    ``quiet_ns`` from now when one is given; ``check``: re-check the entry first and raise
    :class:`EntryUnverified` when that does not pass (only where ``checks_entry``)."""

    name: str
    checks_entry: bool

    def spawn(
        self,
        path: str,
        cwd: str,
        env: Mapping[str, str],
        payload: bytes,
        epoll_fd: int,
        conf: Sequence[int] | None = None,
        quiet: bool = False,
        check: bool = False,
        timer: int = -1,
        quiet_ns: int = 0,
    ) -> Child: ...

    def quiet_timer(self) -> int:
        """A new timer descriptor for quiet starts (readable once it expires), or -1."""
        ...


class PopenSpawner:
    """The pure-Python path: ``subprocess.Popen`` on pipes made here."""

    name = "subprocess"
    checks_entry = False

    def spawn(
        self,
        path: str,
        cwd: str,
        env: Mapping[str, str],
        payload: bytes,
        epoll_fd: int,
        conf: Sequence[int] | None = None,
        quiet: bool = False,
        check: bool = False,
        timer: int = -1,
        quiet_ns: int = 0,
    ) -> Child:
        if check:  # the runner asks only where checks_entry
            raise EntryUnverified(path)
        if conf is not None:  # never unconfined (the runner refuses before asking)
            raise OSError(errno.ENOSYS, "confinement needs the spawn helper", path)
        for name, value in env.items():  # refused as the helper refuses it (Popen takes "=x")
            _env_entry(name, value)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [path],
                stdin=in_r,
                stdout=out_w,
                stderr=err_w,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        for fd in (in_w, out_r, err_r):
            os.set_blocking(fd, False)
        pidfd = _pidfd_open(proc.pid)
        stdin, written = _feed(in_w, payload)
        # The epoll is left to the runner's poller: Python cannot add to it by descriptor.
        return Child(proc.pid, stdin, out_r, err_r, pidfd, written, 0, proc)

    def quiet_timer(self) -> int:
        return -1  # the runner's loop keeps the quiet starts' deadlines instead


class HelperSpawner:
    """The C path: one call of ``ongrid_spawn`` (see ``spawn_helper.c``), and at the call's
    end one of ``ongrid_collect`` (``call_helper.c``)."""

    name = "helper"
    checks_entry = True

    def __init__(self, library: ctypes.CDLL) -> None:
        fn = library.ongrid_spawn
        fn.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_long,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
            ctypes.POINTER(ctypes.c_long),
        ]
        fn.restype = ctypes.c_int
        self._spawn = fn
        self._timer = library.ongrid_quiet_timer
        self._timer.argtypes = []
        self._timer.restype = ctypes.c_int
        # Through a PyDLL view of the library: it does not block (the child has exited, its
        # pipes are non-blocking), so it keeps the GIL rather than drop and take it again.
        collect = ctypes.PyDLL(library._name, handle=library._handle).ongrid_collect
        collect.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        collect.restype = ctypes.c_long
        self._collect = collect
        self._scratch = _Scratch()  # per thread: loops in several threads may collect at once
        confined = library.ongrid_spawn_confined
        confined.argtypes = [*fn.argtypes, ctypes.POINTER(ctypes.c_long)]
        confined.restype = ctypes.c_int
        self._confined = confined
        build = library.ongrid_landlock_ruleset
        build.argtypes = [
            ctypes.c_char_p,
            ctypes.c_long,
            ctypes.POINTER(ctypes.c_long),
            ctypes.c_int,
        ]
        build.restype = ctypes.c_int
        self._ruleset = build

    def ruleset(self, attr: bytes, rules: Sequence[int]) -> int:
        """A Landlock ruleset of ``attr`` with one rule per (O_PATH fd, rights) pair flattened
        in ``rules``: its descriptor (close-on-exec). Raises OSError."""
        words = (ctypes.c_long * len(rules))(*rules)
        fd = self._ruleset(attr, len(attr), words, len(rules) // 2)
        if fd < 0:
            raise OSError(-fd, os.strerror(-fd))
        return int(fd)

    def spawn(
        self,
        path: str,
        cwd: str,
        env: Mapping[str, str],
        payload: bytes,
        epoll_fd: int,
        conf: Sequence[int] | None = None,
        quiet: bool = False,
        check: bool = False,
        timer: int = -1,
        quiet_ns: int = 0,
    ) -> Child:
        # os.fsencode's own encoding, without its Python frame (this runs on every call)
        raw_path = path.encode(_FS_ENCODING, _FS_ERRORS)
        raw_cwd = cwd.encode(_FS_ENCODING, _FS_ERRORS)
        if 0 in raw_path or 0 in raw_cwd:  # C would silently cut the string there
            raise ValueError("embedded null byte")
        blob = b"".join([_env_entry(name, value) for name, value in env.items()]) if env else b""
        out = (ctypes.c_long * 7)()
        flags = (CHECK_ENTRY if check else 0) | (WATCH_PIDFD if quiet else 0)
        given = (raw_path, raw_cwd, blob, len(env), payload, len(payload), epoll_fd, flags)
        if conf is None:
            err = self._spawn(*given, timer, quiet_ns, out)
        else:
            words = (ctypes.c_long * len(conf))(*conf)
            err = self._confined(*given, timer, quiet_ns, out, words)
        if err:
            if err < 0:
                raise EntryUnverified(path)
            raise OSError(err, os.strerror(err), path)
        pid, stdin, stdout, stderr, pidfd, written, watched = out
        return Child(
            pid,
            stdin if stdin >= 0 else None,
            stdout,
            stderr,
            pidfd if pidfd >= 0 else None,
            written,
            watched,
            None,
            self,
        )

    def quiet_timer(self) -> int:
        fd = self._timer()
        return int(fd) if fd >= 0 else -1

    def collect(
        self,
        child: Child,
        pidfd: int,
        out: int,
        err: int,
        room: int,
        slot: int | None,
        timer: int = -1,
    ) -> Collected:
        """At ``child``'s exit: read what its pipes ``out`` and ``err`` hold (-1: at EOF
        already; at most ``room`` bytes of stdout), close those at EOF, and once both are,
        kill the group, clear the record ``slot`` (its address, or None), reap, close
        ``pidfd`` (-1: none) and disarm ``timer`` (-1: none), in that order
        (``ongrid_collect`` in ``call_helper.c``)."""
        scratch = self._scratch
        cap = room if room < _COLLECT_BYTES else _COLLECT_BYTES
        got = self._collect(child.pid, pidfd, out, err, cap, slot, timer, scratch.address)
        n_out, n_err = got & 0xFFFFF, got >> 20 & 0xFFFFF
        reaped, code = got >> 42 & 3, got >> 44 & 0x1FF
        view = scratch.view
        return (
            view[:n_out].tobytes() if n_out else b"",
            view[cap : cap + n_err].tobytes() if n_err else b"",
            got >> 40 & 1 == 1,
            got >> 41 & 1 == 1,
            reaped != 0,
            (code - 512 if code & 256 else code) if reaped == 1 else None,
        )


class _Scratch(threading.local):
    """One thread's buffers for :meth:`HelperSpawner.collect` (made once, not per call)."""

    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(2 * _COLLECT_BYTES)
        self.address = ctypes.addressof(self.buffer)
        self.view = memoryview(self.buffer).cast("B")


_EQUALS = ord("=")


def _env_entry(name: str, value: str) -> bytes:
    """``NAME=value`` and its NUL, refused like ``subprocess`` refuses it."""
    raw_name, raw_value = os.fsencode(name), os.fsencode(value)
    # Bytes as ints: `b"=" in` first tries the needle as an int, raising a TypeError each time.
    if not raw_name or _EQUALS in raw_name:
        raise ValueError("illegal environment variable name")
    if 0 in raw_name or 0 in raw_value:
        raise ValueError("embedded null byte")
    return raw_name + b"=" + raw_value + b"\0"


def _feed(fd: int, payload: bytes) -> tuple[int | None, int]:
    """Write what the pipe takes now; close it once all is written or the reader is gone."""
    done = 0
    while done < len(payload):
        try:
            done += os.write(fd, payload[done:])
        except BlockingIOError:
            return fd, done
        except OSError:  # EPIPE: the child does not read stdin; that is its right
            break
    os.close(fd)
    return None, done


def _pidfd_open(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


# ---- choosing and building --------------------------------------------------------------------


def spawner(mode: Mode = "auto") -> Spawner:
    """The spawner for ``mode``: ``auto`` is the helper unless it is unavailable or switched off
    by ``ONGRID_SPAWN_HELPER=off``; ``helper`` raises RuntimeError when it is unavailable;
    ``subprocess`` is always the fallback."""
    if mode == "subprocess":
        return PopenSpawner()
    if mode == "auto" and _switched_off():
        return PopenSpawner()
    found = _helper()
    if isinstance(found, HelperSpawner):
        return found
    if mode == "helper":
        raise RuntimeError(f"the spawn helper is unavailable: {found}")
    _log_fallback(found)
    return PopenSpawner()


def _switched_off() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() in {"off", "0", "false", "no"}


@functools.cache
def _log_fallback(why: str) -> None:
    LOG.info("spawning skills through subprocess (slower): %s", why)


@functools.cache
def _helper() -> HelperSpawner | str:
    """The helper, loaded (built first when needed); or why it is unavailable."""
    found = helper_library.find()
    if isinstance(found, str):
        return found
    try:
        return HelperSpawner(found)
    except AttributeError as exc:  # a symbol missing: not the library it claims to be
        return f"cannot load the spawn helper: {exc}"


def main() -> int:
    """``python -m ongrid_skills.execution.spawner``: build the helper now; say which is used."""
    found = _helper()
    if isinstance(found, HelperSpawner):
        print("spawn helper ready")
        return 0
    print(f"spawn helper unavailable, subprocess is used: {found}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "Child",
    "Collected",
    "EntryUnverified",
    "HelperSpawner",
    "PopenSpawner",
    "Spawner",
    "after_exit",
    "exits_within",
    "reap",
    "reap_by_pidfd",
    "spawner",
    "wait_no_reap",
]
