"""Watching the descriptors of running calls with one event-loop reader per runner and loop.

A call watches three descriptors (stdout, stderr, its pidfd). Registering each with the event
loop costs a handle, a selector key and asyncio's transport checks, twice (add and remove) per
descriptor and call: on a 2-core machine that was a tenth of the runner's CPU per call. Here the
calls of a runner register their descriptors in one ``epoll`` of their own (one C call each),
and the loop watches that epoll's single descriptor. The spawn helper adds a new call's
descriptors to that epoll itself (:meth:`EpollPoller.fileno`, then :meth:`~EpollPoller.adopt`).
Off Linux, :class:`LoopPoller` registers with the loop directly.

The epoll stays open and watched between calls, until :meth:`~EpollPoller.close` (the runner
closes it when its calls move to another loop, and :meth:`SubprocessRunner.close` does). Making
one per call, as an idle runner once did, added 20-90 µs to every serial call (85 µs in a bare
loop of spawns, 1.42× → 1.39× the C floor in the runner bench: ``bench/README.md``). So a runner
holds one descriptor while its loop lives, and at most one more after that loop has closed, until
its next call, its close or its collection. With the spawn helper, the poller also holds a timer
descriptor (:meth:`EpollPoller.timer`): the helper arms it when it starts a quiet call, and its
expiry ends that call's quiet start, with no timer of the loop's made and cancelled per call.
A forked child never touches the parent's loop: it
only closes its copy of the epoll.

It must never call back for a descriptor that was removed. Descriptors must be removed before
they are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
from collections.abc import Callable
from typing import Protocol

Callback = Callable[[], None]


class Poller(Protocol):
    """Calls ``callback`` on the event loop whenever ``fd`` is readable, until removed."""

    loop: asyncio.AbstractEventLoop

    def fileno(self) -> int:
        """The epoll a spawner may add descriptors to (watched by the loop), or -1."""
        ...

    def add(self, fd: int, callback: Callback) -> None: ...

    def adopt(self, fd: int, callback: Callback) -> None:
        """``fd`` was added to :meth:`fileno`'s epoll already: call ``callback`` for it."""
        ...

    def remove(self, fd: int) -> None: ...

    on_timer: Callback | None  # what the expiry of the timer calls (a call sets it)

    def timer(self, make: Callable[[], int]) -> int:
        """A timer descriptor watched here (made by ``make`` on first use, kept until
        :meth:`close`, not counted in :attr:`idle`) whose expiry calls :attr:`on_timer`; -1
        when this poller has none (the caller keeps its deadline another way)."""
        ...

    def close(self) -> None:
        """Stop watching; only once no descriptor is left (:attr:`idle`)."""
        ...

    @property
    def idle(self) -> bool: ...


class EpollPoller:
    """One epoll watched by the loop while it holds descriptors (Linux)."""

    __slots__ = ("callbacks", "epoll", "loop", "on_timer", "pid", "timer_fd")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.epoll: select.epoll | None = None
        self.callbacks: dict[int, Callback] = {}
        self.pid = os.getpid()
        self.timer_fd = -1
        self.on_timer: Callback | None = None

    @property
    def idle(self) -> bool:
        return not self.callbacks

    def _armed(self) -> select.epoll:
        epoll = self.epoll
        if epoll is None:
            epoll = self.epoll = select.epoll()
            self.loop.add_reader(epoll.fileno(), self._ready)
        return epoll

    def fileno(self) -> int:
        epoll = self.epoll
        return (epoll if epoll is not None else self._armed()).fileno()

    def add(self, fd: int, callback: Callback) -> None:
        self._armed().register(fd, select.EPOLLIN)
        self.callbacks[fd] = callback

    def adopt(self, fd: int, callback: Callback) -> None:
        self.callbacks[fd] = callback

    def remove(self, fd: int) -> None:
        if self.callbacks.pop(fd, None) is None:
            return
        epoll = self.epoll
        assert epoll is not None
        epoll.unregister(fd)

    def timer(self, make: Callable[[], int]) -> int:
        fd = self.timer_fd
        if fd < 0:
            fd = make()
            if fd < 0:
                return -1
            try:
                self._armed().register(fd, select.EPOLLIN)
            except OSError:
                os.close(fd)
                return -1
            self.timer_fd = fd
        return fd

    def close(self) -> None:
        epoll = self.epoll
        if epoll is not None and not self.callbacks:
            self.epoll = None
            if self.timer_fd >= 0:
                os.close(self.timer_fd)
                self.timer_fd = -1
            # Why the pid: in a forked child the loop's selector is the parent's epoll (shared
            # across the fork), and removing the reader would stop the parent's loop watching
            # this poller, so its calls would never end. The child only drops its copy.
            if self.pid == os.getpid():
                self.loop.remove_reader(epoll.fileno())  # nothing to do once it is closed
            epoll.close()

    def _ready(self) -> None:
        epoll = self.epoll
        if epoll is None:
            return
        for fd, _ in epoll.poll(0):
            if fd == self.timer_fd:
                self._expired()
                continue
            # A callback may remove other descriptors (its call ended): look each one up again.
            callback = self.callbacks.get(fd)
            if callback is not None:
                callback()

    def __del__(self) -> None:
        if self.timer_fd >= 0:  # dropped without close(): its epoll object closes itself
            with contextlib.suppress(OSError):
                os.close(self.timer_fd)

    def _expired(self) -> None:
        try:  # read, or it stays readable
            os.read(self.timer_fd, 8)
        except OSError:  # nothing to read: it was re-armed since it expired
            return
        if self.on_timer is not None:
            self.on_timer()


class LoopPoller:
    """Each descriptor registered with the loop itself (no epoll on this platform)."""

    __slots__ = ("callbacks", "loop", "on_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.callbacks: dict[int, Callback] = {}
        self.on_timer: Callback | None = None

    @property
    def idle(self) -> bool:
        return not self.callbacks

    def fileno(self) -> int:
        return -1

    def add(self, fd: int, callback: Callback) -> None:
        self.loop.add_reader(fd, callback)
        self.callbacks[fd] = callback

    def adopt(self, fd: int, callback: Callback) -> None:
        self.add(fd, callback)  # fileno() is -1: nothing was added for us

    def timer(self, make: Callable[[], int]) -> int:
        return -1

    def remove(self, fd: int) -> None:
        if self.callbacks.pop(fd, None) is not None:
            self.loop.remove_reader(fd)

    def close(self) -> None:
        pass  # each descriptor left the loop with its remove()


def new_poller(loop: asyncio.AbstractEventLoop) -> Poller:
    """The poller for calls on ``loop``."""
    return EpollPoller(loop) if hasattr(select, "epoll") else LoopPoller(loop)


__all__ = ["EpollPoller", "LoopPoller", "Poller", "new_poller"]
