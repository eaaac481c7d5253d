"""One call's child after its spawn, driven by the event loop (SPEC §4): stdin, draining
stdout and stderr, the exit, SIGTERM → 2 s → SIGKILL on timeout, ≤ 1 s for the pipes to close
once the main process has exited (then the group is killed), reaping, and the outcome.

:class:`~ongrid_skills.execution.runner.SubprocessRunner` spawns the child and hands it here. It
must never block the event loop, or reap a child before its process group was killed (see
:meth:`ChildCall.finish`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
from collections.abc import Callable
from typing import Protocol

from ongrid_skills.execution.deadlines import Deadlines, LoopDeadlines
from ongrid_skills.execution.poller import Poller
from ongrid_skills.execution.records import Event, EventSink
from ongrid_skills.execution.spawner import (
    WATCHED_ALL,
    WATCHED_TIMED,
    Child,
    after_exit,
    exits_within,
    reap,
    reap_by_pidfd,
    wait_no_reap,
)
from ongrid_skills.execution.spec import SpawnSpec
from ongrid_skills.execution.stderr import StderrTimeline
from ongrid_skills.execution.supervision import GroupRecord
from ongrid_skills.execution.verdict import RunOutcome, verdict
from ongrid_skills.execution.wire import StdoutBuffer


class RunnerSide(Protocol):
    """What a call reads of the runner that spawned it (the runner's, shared by its calls)."""

    stdout_cap: int
    linger: float
    kill_grace: float
    starts: LoopDeadlines  # the ends of its calls' quiet starts, one timer per loop
    deadlines: LoopDeadlines  # the timeouts of its calls, likewise


KILL_GRACE_SECONDS = 2.0
LINGER_SECONDS = 1.0
#: How long a call with a pidfd watches only its child's exit before it watches the pipes too
#: (see ChildCall.__init__): most calls end sooner, in one wake of the event loop.
QUIET_START_SECONDS = 0.005
ABANDON_REAP_SECONDS = 0.1  # how long a cancelled call waits for its SIGKILLed child
_READ_CHUNK = 256 * 1024


class ChildCall:
    """The state machine of one running child."""

    __slots__ = (
        "child",
        "deadlines",
        "done",
        "err",
        "err_fd",
        "exited",
        "loop",
        "on_event",
        "out",
        "out_fd",
        "payload",
        "pid",
        "pidfd",
        "pipes",
        "pipes_watched",
        "poller",
        "quiet_timer",
        "reaped",
        "record",
        "runner",
        "slot",
        "starts",
        "status",
        "stdin",
        "timed_out",
        "timeout",
        "timers",
    )

    def __init__(
        self,
        runner: RunnerSide,
        loop: asyncio.AbstractEventLoop,
        poller: Poller,
        child: Child,
        payload: bytes,
        spec: SpawnSpec,
        on_event: EventSink | None,
        quiet: float = 0.0,
        timer: int = -1,
    ) -> None:
        """``timer``: the poller's quiet-start timer given to the spawner (it was armed if the
        child says so); ``quiet``: the quiet start, kept by the loop when no timer was armed."""
        # Lean on purpose: this runs between the spawn and the loop's next wait, while the child
        # starts on the same core.
        self.loop = loop
        self.poller = poller
        self.record: GroupRecord | None = None  # set by the runner once recorded
        self.slot = -1
        self.runner = runner
        self.child = child
        self.pid = child.pid
        self.on_event = on_event
        self.done: asyncio.Future[None] = loop.create_future()
        self.out = StdoutBuffer(runner.stdout_cap, spec.masker)
        self.err: StderrTimeline | None = None  # made on the first byte of stderr
        self.timed_out = False
        self.timeout = timeout = spec.timeout_seconds
        self.exited = False
        self.reaped = False  # by the helper's collect, at the exit (see _collect)
        self.status: int | None = None
        self.out_fd = out_fd = child.stdout
        self.err_fd = err_fd = child.stderr
        self.pipes = {out_fd, err_fd}  # the read ends not at EOF yet
        self.pidfd = pidfd = child.pidfd
        watched = child.watched  # what the helper added to the poller's epoll already
        self.starts: Deadlines | None = None
        self.quiet_timer = -1
        # A quiet start: the exit alone is watched at first, and the pipes once the quiet start
        # is over (or at the exit, if something still holds them then). A call that ends before
        # (most do) wakes the loop once, at its exit, and drains both pipes then, instead of
        # once for its output, once per pipe closing and once for the exit. Nothing is lost
        # meanwhile: the child's output waits in the pipes (a child with more to write than a
        # pipe holds waits for the quiet start to end), and stderr lines are timestamped as they
        # are read, at most the quiet start late.
        self.pipes_watched = pidfd is None or quiet <= 0 or watched == WATCHED_ALL
        if self.pipes_watched:
            watch = poller.adopt if watched == WATCHED_ALL else poller.add
            watch(out_fd, self._on_stdout)
            watch(err_fd, self._on_stderr)
        elif watched == WATCHED_TIMED:  # the helper armed the poller's timer: it ends the start
            self.quiet_timer = timer
            poller.on_timer = self._watch_pipes
        else:
            self.starts = runner.starts.on(loop)
            self.starts.add(self, quiet, self._watch_pipes)
        if pidfd is not None:
            (poller.adopt if watched else poller.add)(pidfd, self._on_exit)
        else:  # no pidfd (macOS, old kernels): a thread waits without reaping
            loop.run_in_executor(None, wait_no_reap, self.pid).add_done_callback(
                lambda _f: self._on_exit()
            )
        self.stdin = child.stdin
        self.payload = memoryview(payload)[child.written :] if child.stdin is not None else None
        if self.stdin is not None:  # the pipe was full: the rest goes as the child reads
            loop.add_writer(self.stdin, self._on_writable)
        self.timers: list[asyncio.TimerHandle] = []  # the kill grace's and the linger's
        self.deadlines = runner.deadlines.on(loop)
        self.deadlines.add(self, timeout, self._on_timeout)

    def _quiet_done(self) -> None:
        on_timer = self.poller.on_timer
        if on_timer is not None and getattr(on_timer, "__self__", None) is self:
            self.poller.on_timer = None  # a later expiry (it was armed for this call) is moot
        if self.starts is not None:
            self.starts.discard(self)

    def _watch_pipes(self) -> None:
        """The quiet start is over: watch the pipes still open."""
        if self.pipes_watched:
            return
        self.pipes_watched = True
        self._quiet_done()
        for fd in sorted(self.pipes):
            self.poller.add(fd, self._on_stdout if fd == self.out_fd else self._on_stderr)

    # ---- events ---------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a broken sink must not break the call
                self.on_event(event)

    # ---- stdin ----------------------------------------------------------------------------
    def _on_writable(self) -> None:
        fd, payload = self.stdin, self.payload
        if fd is None or payload is None:
            return
        while payload:
            try:
                written = os.write(fd, payload)
            except BlockingIOError:
                self.payload = payload
                return
            except OSError:  # EPIPE: the child does not read stdin; that is its right
                break
            payload = payload[written:]
        self._close_stdin()

    def _close_stdin(self) -> None:
        fd = self.stdin
        if fd is not None:
            self.stdin = None
            self.payload = None
            self.loop.remove_writer(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    # ---- stdout / stderr ------------------------------------------------------------------
    def _on_stdout(self) -> None:
        self._drain(self.out_fd)

    def _on_stderr(self) -> None:
        self._drain(self.err_fd)

    def _drain(self, fd: int) -> None:
        # Read until the pipe is empty: a child that wrote and exited often gives EOF at once,
        # which saves a trip through the event loop.
        for _ in range(16):
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._close_pipe(fd)
                return
            if fd == self.err_fd:
                err = self.err
                if err is None:
                    err = self.err = StderrTimeline(self._emit, self.out.masker)
                err.feed(chunk)
            elif not self.out.take(chunk):  # past the cap: the call is over, kill the group
                self._kill_group(signal.SIGKILL)
                self._close_pipe(fd)
                return

    def _close_pipe(self, fd: int) -> None:
        if fd not in self.pipes:
            return
        self.pipes.discard(fd)
        self.poller.remove(fd)
        if fd == self.err_fd and self.err is not None:
            self.err.close()
        with contextlib.suppress(OSError):
            os.close(fd)
        self._maybe_done()

    # ---- exit, timeout, linger ------------------------------------------------------------
    def _on_exit(self) -> None:
        if self.exited:
            return
        self.exited = True
        if self.pidfd is not None:
            self.poller.remove(self.pidfd)
        if self.child.helper is not None and self.stdin is None:
            self._collect()
        for fd in sorted(self.pipes):  # whatever the child wrote is in the pipes by now
            self._drain(fd)
        if self.pipes:  # a descendant holds them: watch them, for the linger at most
            self._watch_pipes()
            self.timers.append(self.loop.call_later(self.runner.linger, self._on_linger))
        self._maybe_done()

    def _collect(self) -> None:
        """The exit through the helper, in one C call: drain both pipes, and when both are at
        EOF (most calls), everything :meth:`finish` would do (kill the group, clear the record
        slot, reap, close the pidfd) in its order. What is left open is the Python path's."""
        helper = self.child.helper
        assert helper is not None
        pipes, out_fd, err_fd = self.pipes, self.out_fd, self.err_fd
        if self.pipes_watched:  # removed before the helper may close them
            for fd in pipes:
                self.poller.remove(fd)
        record, slot = self.record, self.slot
        out, err, out_eof, err_eof, reaped, status = helper.collect(
            self.child,
            -1 if self.pidfd is None else self.pidfd,
            out_fd if out_fd in pipes else -1,
            err_fd if err_fd in pipes else -1,
            self.out.room(),
            record.address(slot) if record is not None else None,
            self.quiet_timer if not self.pipes_watched else -1,  # disarmed: the call is over
        )
        if reaped:
            self.reaped = True
            self.status = status
            self.pidfd = None  # closed by the helper
            if record is not None:
                record.released(slot)
                self.record = None
        if err:
            timeline = self.err
            if timeline is None:
                timeline = self.err = StderrTimeline(self._emit, self.out.masker)
            timeline.feed(err)
        if err_eof:
            pipes.discard(err_fd)
            if self.err is not None:
                self.err.close()
        if out_eof:
            pipes.discard(out_fd)
        if out and not self.out.take(out):  # past the cap: as _drain does
            self._kill_group(signal.SIGKILL)
            self._close_pipe(out_fd)
        if self.pipes_watched:
            for fd in pipes:
                self.poller.add(fd, self._on_stdout if fd == out_fd else self._on_stderr)

    def _on_linger(self) -> None:
        # The main process is gone but something still holds the pipes: end it now.
        self._kill_group(signal.SIGKILL)
        for fd in sorted(self.pipes):
            self._drain(fd)  # what is already in the pipe, with the stdout cap applied
            self._close_pipe(fd)

    def _on_timeout(self) -> None:
        if self.done.done() or self.exited:
            return
        self.timed_out = True
        self._kill_group(signal.SIGTERM)
        self.timers.append(
            self.loop.call_later(self.runner.kill_grace, self._kill_group, signal.SIGKILL)
        )

    def _kill_group(self, sig: signal.Signals) -> None:
        # Safe: the leader is not reaped before the call ends, so the group id is still ours.
        if self.reaped:  # it was (by the helper, with the group killed first): no longer ours
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def _maybe_done(self) -> None:
        if self.exited and not self.pipes and not self.done.done():
            self.done.set_result(None)

    def finish(self) -> None:
        """The call is done (exited, pipes at EOF): kill what is left of the group, reap."""
        self.deadlines.discard(self)
        self._quiet_done()
        for timer in self.timers:
            timer.cancel()
        if self.reaped:  # all done at the exit, in this order (see _collect)
            return
        self._close_stdin()
        # Why this order: kill the group, reap the leader, then (in SubprocessRunner.run) sweep
        # orphans. The group id is the leader's pid, and an unreaped leader (a zombie) keeps
        # that pid taken, so until the reap no other process can own this group id: killpg()
        # can only hit what the skill started. Reaping first would free the id for reuse, and a
        # late killpg() could kill an unrelated group. The sweep comes last because it kills and
        # reaps every child of ours in the call's session: run before the reap, it would take
        # the leader itself (losing its exit status and counting it as an orphan).
        self._kill_group(signal.SIGKILL)  # leftovers of the group that closed their pipes
        self._unrecord()  # before the reap, for the same reason: the id is still ours
        self.status = reap(self.pid)
        self.child.reaped(self.status)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def abandon(self, then: Callable[[], object] | None = None) -> None:
        """The awaiting task was cancelled: kill everything now, reap, then call ``then``.

        A SIGKILLed process is normally gone at once, so it is reaped right here: the event loop
        may be about to close (``asyncio.run`` around a cancelled ``wait_for``), and a reader
        that never fires would leak the pidfd. A child that outlives ``ABANDON_REAP_SECONDS``
        (uninterruptible sleep) is reaped by a thread waiting for its exit, for that reason.
        """
        self.deadlines.discard(self)
        self._quiet_done()
        for timer in self.timers:
            timer.cancel()
        self._kill_group(signal.SIGKILL)  # before the reap, as in finish
        self._close_stdin()
        for fd in sorted(self.pipes):
            self._close_pipe(fd)
        pidfd = self.pidfd
        if pidfd is not None and not self.exited:
            self.poller.remove(pidfd)
            if not exits_within(pidfd, ABANDON_REAP_SECONDS):
                late = functools.partial(self._reaped_late, then)
                try:
                    after_exit(pidfd, late)
                except RuntimeError:  # no thread to be had: the loop's reader, as a last resort
                    self.poller.add(pidfd, late)
                return
        self._finish_quietly(then)

    def _reaped_late(self, then: Callable[[], object] | None) -> None:
        # In the waiting thread (or, failing one, on the loop). The sweep must see the other
        # calls' spawns as they happen: it runs on the loop, or at the next call once closed.
        if self.pidfd is not None:
            self.poller.remove(self.pidfd)  # watched only on the loop's path
        self._finish_quietly()
        if then is not None:  # a sweep that fails there is reported by the loop's handler
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(then)

    def _finish_quietly(self, then: Callable[[], object] | None = None) -> None:
        self._unrecord()
        if not self.reaped:  # (it was at its exit, by the helper, when cancelled only after)
            with contextlib.suppress(Exception):  # by pidfd: a sweep may take the pid
                pidfd = self.pidfd
                self.status = reap(self.pid) if pidfd is None else reap_by_pidfd(pidfd, self.pid)
                self.child.reaped(self.status)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if then is not None:
            with contextlib.suppress(Exception):  # in a cancellation: it must not replace it
                then()

    def _unrecord(self) -> None:
        if self.record is not None:
            self.record.remove(self.slot)
            self.record = None

    # ---- result ----------------------------------------------------------------------------
    def outcome(self) -> RunOutcome:
        tail = self.err.tail() if self.err is not None else ""
        return verdict(self.status, self.timed_out, self.timeout, self.out, tail)
