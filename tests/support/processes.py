"""Real processes: the console scripts of this virtualenv and what /proc says about a pid.

Read-only probes; waiting for a process to change state goes through
:func:`tests.support.waiting.wait_for` with one of these as the check.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path


def venv_bin(name: str) -> str:
    """Path of a console script installed beside the running interpreter."""
    return os.path.join(os.path.dirname(sys.executable), name)


#: The product's console script.
CLI = venv_bin("ongrid-skills")


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of a process, or None when it no longer exists."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])


def pid_gone(pid: int) -> bool:
    """True once the process is dead AND reaped (a zombie still counts as present)."""
    return proc_stat(pid) is None


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    info = proc_stat(pid)
    return info is not None and info[0] not in {"Z", "X"}


def zombie_children() -> set[int]:
    """Pids of zombies whose parent is this (test) process."""
    me = os.getpid()
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        info = proc_stat(int(name))
        if info is not None and info[0] == "Z" and info[1] == me:
            found.add(int(name))
    return found


def read_pid(path: Path) -> int | None:
    """The pid ``path`` holds once a whole line was written to it, else None."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text.split()[0]) if text.endswith("\n") else None


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def open_fds_settled() -> int:
    """:func:`open_fds` once the garbage earlier tests left is collected, for the count taken
    before the code under test runs: a runner that only the cycle collector frees holds its
    epoll until then, and a collection in the middle of the test would close it there (a
    descriptor count that drops is as wrong as one that grows). A collection costs 0.1 s or
    more in the suite's process, so only where a count has been seen to move this way."""
    gc.collect()
    return open_fds()


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        return
