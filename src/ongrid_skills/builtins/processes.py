"""The processes built-ins start themselves (``read_journal``'s ``journalctl``): the orphan sweep
leaves them alone.

The runner's orphan sweep (:mod:`ongrid_skills.execution.reaper`) kills a child of the manager
that sits in a session of its own and cannot belong to a call still running: that is what a
skill's ``setsid`` daemon looks like once it is re-parented to the manager. A built-in that runs a
program in a session of its own (so that its whole group can be killed at a deadline) makes a
child that looks the same. Without this list, a skill call ending while ``journalctl`` ran killed
and reaped it: the journal read lost its output, and on uvloop, whose child watcher never learns
of an exit someone else reaped, it waited for ever.

A built-in wraps the start of such a process in :func:`started_here` and names its pid once it
has one; from before the start (the sweep may run in another thread meanwhile) until the context
ends, the sweep spares it. Process-wide on purpose: every runner of the process sweeps the same
children.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

_TICKS = os.sysconf("SC_CLK_TCK")
_lock = threading.Lock()
_pids: set[int] = set()
_starting: dict[int, float] = {}  # a start in progress -> when it began (boot clock ticks)
_keys = itertools.count(1)


def boot_ticks() -> float:
    """Now, in the clock ticks since boot that ``/proc/<pid>/stat`` uses for start times."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS


@contextmanager
def started_here() -> Iterator[Callable[[int], None]]:
    """Around the start and the life of a process a built-in starts: call the value with its pid
    once started. The sweep spares every child started since the context was entered until a pid
    is named, and that pid until the context ends (after the process was reaped)."""
    key = next(_keys)
    named: list[int] = []
    with _lock:
        _starting[key] = boot_ticks()

    def name(pid: int) -> None:
        with _lock:
            _pids.add(pid)
            named.append(pid)
            _starting.pop(key, None)

    try:
        yield name
    finally:
        with _lock:
            _starting.pop(key, None)
            _pids.difference_update(named)


def started_since(started: float, beginnings: Iterable[float]) -> bool:
    """Whether a process started at ``started`` may have been started at or after any of
    ``beginnings`` (boot clock ticks): ``/proc`` counts whole ticks, hence the tick of slack."""
    return any(started >= began - 1 for began in beginnings)


def spared(pid: int, started: float) -> bool:
    """Whether the sweep must leave the child ``pid``, started at ``started`` (boot clock ticks),
    alone: a built-in's process, or one that may be a built-in's being started."""
    with _lock:
        return pid in _pids or started_since(started, _starting.values())


def pids() -> frozenset[int]:
    """The built-ins' processes running now."""
    with _lock:
        return frozenset(_pids)


__all__ = ["boot_ticks", "pids", "spared", "started_here", "started_since"]
