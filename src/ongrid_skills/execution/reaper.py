"""Orphan sweeping: kill what a skill left behind outside its process group (Linux).

The manager makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): a process whose
parent dies is re-parented to the manager instead of init. A daemon that a skill detached with
``setsid`` (so that ``killpg`` misses it) therefore becomes a child of ours once its parent skill
process exits. After each call the sweeper lists our children (``/proc/self/task/*/children``),
keeps those that are neither a running call's main process nor in the manager's own session, and
kills the ones that can be attributed to the ending call:

- a child still in the session of the ending call (the session id is the call's main pid);
- a child in a session of its own that started before every other call still running (so it
  cannot be theirs). Otherwise it is left for the sweep at the end of the next call.

A sweep first looks at the main thread's children only (one small read): the kernel re-parents
orphans to a subreaper's first live thread, the main thread, so when that list holds nothing but
running calls and the children named by the runner (its sentinel), no orphan arrived and the
full sweep is skipped. That is the common case, and it saves listing every thread's children
and reading each child's ``stat`` after every call.

Processes the manager started itself in a new session through other code would look like
orphans: its sentinel (:mod:`ongrid_skills.execution.supervision`) stays in the manager's session
for that reason, and the built-ins that start a program in a session of its own list it in
:mod:`ongrid_skills.builtins.processes`, which the sweep spares. Embedders who start such processes
otherwise can list them there too, or disable the sweeper.

Order matters: the runner sweeps only after it killed the call's process group and reaped its
main process (see ``_Call._finish`` in :mod:`ongrid_skills.execution.runner`). Swept earlier,
the main process would itself be taken for an orphan, killed and reaped here, and its exit status
lost. The sweep must never kill a process of the manager's own session, nor one that may belong
to a call still running.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Collection

from ongrid_skills.builtins import processes
from ongrid_skills.builtins.processes import boot_ticks, started_since
from ongrid_skills.execution.sentinel import proc_stat

PR_SET_CHILD_SUBREAPER = 36
_MAX_PASSES = 8  # depth of a detached process tree a single sweep unwinds
_LIST_BYTES = 65536  # a longer list of children is read in full by the sweep


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The process's own symbols include libc's: no library search (find_library runs
        # ldconfig, milliseconds per runner).
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class OrphanReaper:
    """The manager's subreaper bookkeeping: the calls running now, and the sweep after each."""

    def __init__(self) -> None:
        self.enabled = _become_subreaper()
        self.own_sid = os.getsid(0)
        self.pid = os.getpid()
        self.live: dict[int, float] = {}  # main pid of each running call -> start (boot ticks)
        self._keys = itertools.count(1)
        self._known: Collection[int] = ()
        self._known_list = b""
        if self.enabled:
            _MainChildren.open()

    def call_started(self, pid: int) -> None:
        """Note a call's main pid and start time while it runs: its orphans are not swept yet."""
        if self.enabled:
            self.live[pid] = boot_ticks()

    def spawning(self) -> int:
        """Note a spawn about to start (in another thread, maybe): until :meth:`spawned` names
        its pid, a sweep takes no child started from now on. Returns a key for that."""
        key = -next(self._keys)  # never a pid
        if self.enabled:
            self.live[key] = boot_ticks()
        return key

    def spawned(self, key: int, pid: int) -> None:
        """The spawn noted under ``key`` started ``pid``: it is a running call from then on."""
        began = self.live.pop(key, None)
        if began is not None:
            self.live[pid] = began

    def call_ended(self, pid: int) -> None:
        """Forget a call, so that the sweep may take what is left in its session."""
        self.live.pop(pid, None)

    def sweep(self, call_pid: int, known: Collection[int] = ()) -> int:
        """Kill the orphans attributable to the call whose main pid was ``call_pid``.

        ``known``: children of ours that are no call's leftovers (the sentinel); seeing only
        those and running calls among the main thread's children, the sweep stops there."""
        # In a forked copy of the manager, self.pid is the parent's: those children are not
        # ours to kill (and the subreaper flag is not inherited across fork anyway). The
        # list's pid says so without a getpid (0 there, or the copy's own pid).
        if not self.enabled or _MainChildren.pid != self.pid:
            return 0
        if not self._strays(known):
            return 0
        killed = 0
        ours = {call_pid}  # sessions known to belong to the ending call
        seen: set[int] = set()
        # Killing an orphan re-parents its own children (a daemon's workers) to us: sweep again
        # until a pass finds nothing new. Their sessions are the ending call's by descent.
        for _ in range(_MAX_PASSES):
            found = False
            for pid in _children(self.pid):
                if pid in self.live or pid in seen:
                    continue
                info = proc_stat(pid)
                if info is None:
                    continue
                _state, _group, sid, start = info
                if sid == self.own_sid or sid in self.live or processes.spared(pid, start):
                    continue  # the manager's own, a running call, or a built-in's (journalctl)
                if sid not in ours and started_since(start, self.live.values()):
                    continue  # may belong to a call still running: a later sweep decides
                seen.add(pid)
                ours.add(sid)
                found = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                _reap_soon(pid)
            if not found:
                break
        return killed

    def _alone(self, known: Collection[int]) -> bytes:
        """The list of the main thread's children when it has ``known`` children alone."""
        if known != self._known:
            self._known, self._known_list = known, b"".join(b"%d " % p for p in known)
        return self._known_list

    def _strays(self, known: Collection[int]) -> bool:
        """Whether the main thread has a child that is neither a running call nor ``known``
        (True as well when its list cannot be read: then the full sweep decides)."""
        raw = _MainChildren.read()
        if raw is None:
            return True
        if not raw or (not self.live and raw == self._alone(known)):
            return False  # the common case, without parsing: nothing but the sentinel
        live, own = self.live, processes.pids()
        return any(
            int(p) not in live and int(p) not in known and int(p) not in own for p in raw.split()
        )


class _MainChildren:
    """``/proc/<pid>/task/<pid>/children``, kept open once per process and re-read with
    ``pread`` (one system call instead of open, read and close after every call). ``pid`` is
    the process it was opened in, 0 in a forked child until it opens its own (an at-fork hook
    says so: no ``getpid`` per call)."""

    lock = threading.Lock()
    fd = -1
    pid = 0
    hooked = False

    @classmethod
    def open(cls) -> None:
        pid = os.getpid()
        with cls.lock:
            if not cls.hooked:
                os.register_at_fork(after_in_child=cls._forked)
                cls.hooked = True
            if cls.pid == pid:
                return
            cls.pid, cls.fd = pid, -1  # a forked child must not read its parent's list
            with contextlib.suppress(OSError):
                cls.fd = os.open(f"/proc/{pid}/task/{pid}/children", os.O_RDONLY | os.O_CLOEXEC)

    @classmethod
    def _forked(cls) -> None:
        if cls.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(cls.fd)  # the parent's list
        cls.pid, cls.fd = 0, -1
        cls.lock = threading.Lock()  # the parent may have held it at the fork

    @classmethod
    def read(cls) -> bytes | None:
        """The list, or None when it cannot be read whole."""
        if cls.pid == 0:
            cls.open()
        if cls.fd < 0:
            return None
        try:
            raw = os.pread(cls.fd, _LIST_BYTES, 0)
        except OSError:
            return None
        return None if len(raw) >= _LIST_BYTES else raw


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                found.extend(int(p) for p in fh.read().split())
        except OSError:
            continue
    return found


def _reap_soon(pid: int) -> None:
    """Reap a killed orphan without blocking for long (SIGKILL is prompt but asynchronous)."""
    deadline = time.monotonic() + 0.5
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() > deadline:
            return
        time.sleep(0.001)
