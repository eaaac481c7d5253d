"""The child's life: the only module that spawns a skill (SPEC §4), and the Runner protocol.

One call = one child, spawned directly (argv ``[entry]``, no shell) in a new session, cwd = the
skill's folder, environment = exactly the allowed names. Everything after the spawn is driven by
the event loop without threads: the pipes are non-blocking readers/writers of the loop, and the
child's exit is watched through a pidfd. This module owns that state machine: spawn, stdin,
draining, exit, SIGTERM → 2 s → SIGKILL on timeout, ≤ 1 s for the pipes to close once the main
process has exited (then the group is killed), reaping, and the verdict from the exit status.
What the bytes mean is not decided here: stdout goes to :mod:`ongrid_skills.execution.wire`
(16 MiB cap, result decoding), stderr to :mod:`ongrid_skills.execution.stderr` (line events,
budget, tail). Descendants that escaped the group (``setsid`` daemons) are found by the orphan
sweeper (:mod:`ongrid_skills.execution.reaper`) and killed after every call.

Children die with their manager, however it dies (:mod:`ongrid_skills.execution.supervision`):
each call's session is written to a group record after the spawn and blanked before the reap,
and one sentinel process per manager kills what is recorded when the manager's pipe to it closes.
Why not ``PR_SET_PDEATHSIG``: it needs ``preexec_fn`` (which forces ``fork``, milliseconds per
call) or a helper exec'd before the entry (one more exec per call, as much as the call itself);
it fires when the spawning *thread* exits, not the process; and it reaches only the child, not
its grandchildren. The record costs two memory stores per call; the sentinel, nothing until the
end.

It must never use a shell, inherit the manager's environment, block the event loop, or reap a
child before its process group was killed (see :meth:`_Call._finish`).

:class:`Runner` is all the pipeline and the manager need from a runner; besides
:class:`SubprocessRunner`, :class:`~ongrid_skills.execution.function_runner.FunctionRunner`
implements it in-process for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, Protocol

from ongrid_skills.execution.reaper import OrphanReaper
from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Status
from ongrid_skills.execution.stderr import StderrTimeline
from ongrid_skills.execution.supervision import SUPPORTED, GroupRecord, supervision
from ongrid_skills.execution.wire import STDOUT_CAP, StdoutBuffer, decode_result
from ongrid_skills.paths import check_entry

KILL_GRACE_SECONDS = 2.0
LINGER_SECONDS = 1.0
ABANDON_REAP_SECONDS = 0.1  # how long a cancelled call waits for its SIGKILLed child
_READ_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """What to spawn: a canonical entry under a canonical root, where, with which environment."""

    entry: str
    root: str
    cwd: str
    env: Mapping[str, str]
    timeout_seconds: float
    shown_root: str = ""
    confine: str | None = None  # a folder the entry must also stay in (a SKILL.md's exec:)


@dataclass(slots=True)
class RunOutcome:
    """How one call ended: its status and error, the verbatim result, exit code and stderr."""

    status: Status
    stdout: bytes = b""
    result: Any = None
    result_text: str | None = None
    error: ErrorInfo | None = None
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: str = ""
    orphans_killed: int = 0
    started_at: float | None = None
    duration_ms: float = 0.0


class Runner(Protocol):
    """Runs one admitted call of a skill with a target: all the pipeline and manager ask of it."""

    async def run(
        self, spec: SpawnSpec, payload: bytes, on_event: EventSink | None = None
    ) -> RunOutcome:
        """Run the call to its end: ``payload`` is the args JSON, ``on_event`` gets the
        timeline events. A skill's failure is the outcome, never an exception; cancelling the
        awaiting task stops the call and propagates."""
        ...


class SubprocessRunner:
    """Runs subprocess skills. One instance per manager; safe for concurrent calls."""

    def __init__(
        self,
        *,
        reap_orphans: bool = True,
        stdout_cap: int = STDOUT_CAP,
        kill_grace: float = KILL_GRACE_SECONDS,
        linger: float = LINGER_SECONDS,
        supervise: bool = True,
        groups_dir: str | None = None,
    ) -> None:
        """``supervise``: record each call for the sentinel (Linux); ``groups_dir``: keep the
        record there (a manager's data dir) so start-up recovery can read it too."""
        self.stdout_cap = stdout_cap
        self.kill_grace = kill_grace
        self.linger = linger
        self.reaper = OrphanReaper() if reap_orphans else None
        self.supervise = supervise and SUPPORTED
        self.groups_dir = groups_dir
        self.record: GroupRecord | None = None

    async def run(
        self, spec: SpawnSpec, payload: bytes, on_event: EventSink | None = None
    ) -> RunOutcome:
        """Run one call to its end. Cancelling the awaiting task kills the process group."""
        check = check_entry(spec.entry, spec.root, spec.shown_root or spec.root, spec.confine)
        if check.problem is not None:
            return RunOutcome(Status.FAILED, error=ErrorInfo("entry_rejected", check.problem))
        record = self.record
        if self.supervise and (record is None or record.fd < 0):  # first call, or forked
            record = self.record = supervision().record(self.groups_dir)
            self.supervise = record is not None
        started_wall = time.time()
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [check.path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=spec.cwd,
                env=dict(spec.env),
                start_new_session=True,
                close_fds=True,
                bufsize=0,
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            return RunOutcome(
                Status.FAILED,
                error=ErrorInfo("spawn_failed", f"cannot start {check.path}: {reason}"),
                started_at=started_wall,
            )
        call = _Call(self, proc, payload, spec.timeout_seconds, on_event)
        if record is not None:
            call.record, call.slot = record, record.add(proc.pid)
        if self.reaper is not None:
            self.reaper.call_started(proc.pid)
        try:
            await call.wait()
        except BaseException:
            # Cancelled: the group is killed now; once the main process is reaped, sweep what it
            # left (its killed children were re-parented to us and must be reaped, and setsid
            # daemons killed). The call is no longer live for that sweep.
            sweep: Callable[[], object] | None = None
            if self.reaper is not None:
                self.reaper.call_ended(proc.pid)
                sweep = functools.partial(self.reaper.sweep, proc.pid)
            call.abandon(sweep)
            raise
        finally:
            if self.reaper is not None:
                self.reaper.call_ended(proc.pid)
        orphans = self.reaper.sweep(proc.pid) if self.reaper is not None else 0
        outcome = call.outcome()
        outcome.orphans_killed = orphans
        outcome.started_at = started_wall
        outcome.duration_ms = round((time.monotonic() - started) * 1000, 3)
        return outcome


class _Call:
    """The state machine of one running child."""

    def __init__(
        self,
        runner: SubprocessRunner,
        proc: subprocess.Popen[bytes],
        payload: bytes,
        timeout: float,
        on_event: EventSink | None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.record: GroupRecord | None = None  # set by the runner once recorded
        self.slot = -1
        self.runner = runner
        self.proc = proc
        self.pid = proc.pid
        self.on_event = on_event
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.out = StdoutBuffer(runner.stdout_cap)
        self.timed_out = False
        self.timeout = timeout
        self.exited = False
        self.status: int | None = None
        self.err = StderrTimeline(self._emit)
        self.open_pipes = 2
        self.payload = memoryview(payload)
        self.timers: list[asyncio.TimerHandle] = []
        assert proc.stdin and proc.stdout and proc.stderr
        self.pipes: dict[int, IO[bytes]] = {
            proc.stdout.fileno(): proc.stdout,
            proc.stderr.fileno(): proc.stderr,
        }
        self.out_fd = proc.stdout.fileno()
        self.err_fd = proc.stderr.fileno()
        for fd in self.pipes:
            os.set_blocking(fd, False)
            self.loop.add_reader(fd, self._on_readable, fd)
        self.stdin: IO[bytes] | None = proc.stdin
        os.set_blocking(proc.stdin.fileno(), False)
        self._write_stdin()
        self.pidfd = _pidfd_open(self.pid)
        if self.pidfd is not None:
            self.loop.add_reader(self.pidfd, self._on_exit)
        else:  # no pidfd (macOS, old kernels): a thread waits without reaping
            self.loop.run_in_executor(None, _wait_no_reap, self.pid).add_done_callback(
                lambda _f: self._on_exit()
            )
        self.timers.append(self.loop.call_later(timeout, self._on_timeout))

    # ---- events ---------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):
                self.on_event(event)

    # ---- stdin ----------------------------------------------------------------------------
    def _write_stdin(self) -> None:
        stdin = self.stdin
        if stdin is None:
            return
        fd = stdin.fileno()
        while self.payload:
            try:
                written = os.write(fd, self.payload)
            except BlockingIOError:
                self.loop.add_writer(fd, self._on_writable)
                return
            except OSError:  # EPIPE: the child does not read stdin; that is its right
                break
            self.payload = self.payload[written:]
        self._close_stdin()

    def _on_writable(self) -> None:
        if self.stdin is not None:
            self.loop.remove_writer(self.stdin.fileno())
        self._write_stdin()

    def _close_stdin(self) -> None:
        if self.stdin is not None:
            self.loop.remove_writer(self.stdin.fileno())
            with contextlib.suppress(OSError):
                self.stdin.close()
            self.stdin = None
            self.payload = memoryview(b"")

    # ---- stdout / stderr ------------------------------------------------------------------
    def _on_readable(self, fd: int) -> None:
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
                self.err.feed(chunk)
            elif not self.out.take(chunk):  # past the cap: the call is over, kill the group
                self._kill_group(signal.SIGKILL)
                self._close_pipe(fd)
                return

    def _close_pipe(self, fd: int) -> None:
        pipe = self.pipes.pop(fd, None)
        if pipe is None:
            return
        self.loop.remove_reader(fd)
        if fd == self.err_fd:
            self.err.close()
        with contextlib.suppress(OSError):
            pipe.close()
        self._maybe_done()

    # ---- exit, timeout, linger ------------------------------------------------------------
    def _on_exit(self) -> None:
        if self.exited:
            return
        self.exited = True
        if self.pidfd is not None:
            self.loop.remove_reader(self.pidfd)
        for fd in list(self.pipes):  # whatever the child wrote is in the pipes by now
            self._on_readable(fd)
        if self.pipes:
            self.timers.append(self.loop.call_later(self.runner.linger, self._on_linger))
        self._maybe_done()

    def _on_linger(self) -> None:
        # The main process is gone but something still holds the pipes: end it now.
        self._kill_group(signal.SIGKILL)
        for fd in list(self.pipes):
            self._on_readable(fd)  # what is already in the pipe, with the stdout cap applied
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
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def _maybe_done(self) -> None:
        if self.exited and not self.pipes and not self.done.done():
            self.done.set_result(None)

    async def wait(self) -> None:
        await self.done
        self._finish()

    def _finish(self) -> None:
        for timer in self.timers:
            timer.cancel()
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
        self.status = _reap(self.pid)
        self.proc.returncode = self.status
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def abandon(self, then: Callable[[], object] | None = None) -> None:
        """The awaiting task was cancelled: kill everything now, reap, then call ``then``.

        A SIGKILLed process is normally gone at once, so it is reaped right here: the event loop
        may be about to close (``asyncio.run`` around a cancelled ``wait_for``), and a reader
        that never fires would leak the pidfd. Only a child that does not die within
        ``ABANDON_REAP_SECONDS`` (uninterruptible sleep) is reaped in the background.
        """
        for timer in self.timers:
            timer.cancel()
        self._kill_group(signal.SIGKILL)  # before the reap, as in _finish
        self._close_stdin()
        for fd in list(self.pipes):
            self._close_pipe(fd)
        pidfd = self.pidfd
        if pidfd is not None and not self.exited:
            self.loop.remove_reader(pidfd)
            if not _exits_within(pidfd, ABANDON_REAP_SECONDS):

                def reap_later() -> None:
                    self.loop.remove_reader(pidfd)
                    self._finish_quietly(then)

                self.loop.add_reader(pidfd, reap_later)
                return
        self._finish_quietly(then)

    def _finish_quietly(self, then: Callable[[], object] | None = None) -> None:
        self._unrecord()
        with contextlib.suppress(Exception):
            self.status = _reap(self.pid)
            self.proc.returncode = self.status
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if then is not None:
            with contextlib.suppress(Exception):
                then()

    def _unrecord(self) -> None:
        if self.record is not None:
            self.record.remove(self.slot)
            self.record = None

    # ---- result ---------------------------------------------------------------------------
    def outcome(self) -> RunOutcome:
        code = self.status
        out = RunOutcome(Status.FAILED, stdout=bytes(self.out.data), stderr_tail=self.err.tail())
        if code is not None and code >= 0:
            out.exit_code = code
        elif code is not None:
            out.signal = _signal_name(-code)
        if self.timed_out:
            out.status = Status.TIMED_OUT
            out.error = ErrorInfo("timed_out", f"timed out after {self.timeout:g} s")
        elif self.out.too_large:
            out.status = Status.OUTPUT_TOO_LARGE
            out.error = self.out.overflow()
        elif code is None:
            out.error = ErrorInfo("exit_status", "exit status unknown")
        elif code < 0:
            out.error = ErrorInfo("killed_by_signal", f"killed by signal {out.signal}")
        elif code > 0:
            out.error = ErrorInfo("exit_status", f"exit status {code}")
        else:
            decoded = decode_result(out.stdout)
            if decoded.error is not None:
                out.error = decoded.error
            else:
                out.status = Status.SUCCEEDED
                out.result = decoded.value
                out.result_text = decoded.text
        return out


def _pidfd_open(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def _exits_within(pidfd: int, seconds: float) -> bool:
    """Wait at most ``seconds`` for the process behind ``pidfd`` to exit."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(seconds * 1000))


def _wait_no_reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def _reap(pid: int) -> int | None:
    """Reap an exited child; its return code in Popen's convention (negative = signal)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return None
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        return os.waitstatus_to_exitcode(status)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


__all__ = ["RunOutcome", "SpawnSpec", "SubprocessRunner"]
