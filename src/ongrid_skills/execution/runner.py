"""The child's life: the only module that spawns a skill (SPEC §4), and the Runner protocol.

One call = one child, spawned directly (argv ``[entry]``, no shell) in a new session, cwd = the
skill's folder, environment = exactly the allowed names, by the spawn helper or ``subprocess``
(:mod:`ongrid_skills.execution.spawner`). Everything after the spawn is driven by the event loop
(a thread only reaps a cancelled call's child that outlives its SIGKILL): the pipes are
non-blocking, and they and the pidfd are watched through the runner's poller
(:mod:`ongrid_skills.execution.poller`); for its first ``quiet_start`` (5 ms) a call started alone
watches its pidfd only, so if it ends by then it wakes the loop once and drains its pipes at exit.
This module owns that state machine: spawn, stdin, draining, exit, SIGTERM → 2 s → SIGKILL on
timeout, ≤ 1 s for the pipes to close once the main process has exited (then the group is killed),
reaping, and the verdict from the exit status.
What the bytes mean is not decided here: stdout goes to ``wire`` (cap, decoding), stderr to
``stderr`` (line events, budget, tail), both masked by the call's ``masking.Masker``, and the
outcome is ``verdict``'s. Descendants that escaped the group (``setsid`` daemons) are found by
the orphan sweeper (``reaper``) and killed after the call that left them.

Children die with their manager, however it dies (:mod:`ongrid_skills.execution.supervision`,
which says why not ``PR_SET_PDEATHSIG``): each call's session is written to a group record after
the spawn and blanked before the reap, and one sentinel process per manager kills what is
recorded when the manager's pipe to it closes.

It must never use a shell, inherit the manager's environment, block the event loop, or reap a
child before its process group was killed (see
:meth:`~ongrid_skills.execution.child_call.ChildCall.finish`).

:class:`Runner` is all the pipeline and the manager need from a runner; besides
:class:`SubprocessRunner`, :class:`~ongrid_skills.execution.function_runner.FunctionRunner`
implements it in-process for tests.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping

from ongrid_skills.errors import SandboxUnavailable
from ongrid_skills.execution.child_call import (
    ABANDON_REAP_SECONDS,
    KILL_GRACE_SECONDS,
    LINGER_SECONDS,
    QUIET_START_SECONDS,
    ChildCall,
)
from ongrid_skills.execution.confine import SandboxPolicy
from ongrid_skills.execution.deadlines import LoopDeadlines
from ongrid_skills.execution.poller import LoopPoller, Poller, new_poller
from ongrid_skills.execution.reaper import OrphanReaper
from ongrid_skills.execution.records import ErrorInfo, EventSink, Status
from ongrid_skills.execution.spawn_pool import SpawnPool
from ongrid_skills.execution.spawner import (
    EntryUnverified,
    Mode,
    Spawner,
    spawner,
)
from ongrid_skills.execution.spec import Runner, SpawnSpec
from ongrid_skills.execution.supervision import SUPPORTED, GroupRecord, supervision
from ongrid_skills.execution.verdict import RunOutcome
from ongrid_skills.execution.wire import STDOUT_CAP
from ongrid_skills.paths import check_entry, is_within
from ongrid_skills.skills.sandbox import NONE

__all__ = [
    "ABANDON_REAP_SECONDS",
    "KILL_GRACE_SECONDS",
    "LINGER_SECONDS",
    "QUIET_START_SECONDS",
    "RunOutcome",
    "Runner",
    "SpawnSpec",
    "SubprocessRunner",
]


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
        spawn: Mode = "auto",
        sandbox: SandboxPolicy | None = None,
        quiet_start: float = QUIET_START_SECONDS,
    ) -> None:
        """``supervise``: record each call for the sentinel (Linux); ``groups_dir``: keep the
        record there (a manager's data dir) so start-up recovery can read it too; ``spawn``:
        ``auto`` (the spawn helper when it is available), ``helper`` or ``subprocess``;
        ``quiet_start``: how long a call started while no other call of the runner runs watches
        only its child's exit (0: the pipes from the start, as calls started beside others)."""
        self.sandbox = sandbox or SandboxPolicy()  # the operator's: defaults, limits, secrets
        self.stdout_cap = stdout_cap
        self.kill_grace = kill_grace
        self.linger = linger
        self.quiet_start = quiet_start
        self.reaper = OrphanReaper() if reap_orphans else None
        self.supervise = supervise and SUPPORTED
        self.groups_dir = groups_dir
        self.record: GroupRecord | None = None
        self.spawn_mode: Mode = spawn
        self.spawner: Spawner | None = None  # chosen on the first call (may build the helper)
        self._poller: Poller | None = None
        self.deadlines = LoopDeadlines()  # the timeouts of its calls, one timer per loop
        # the ends of its calls' quiet starts, likewise; a timer left armed with no call to end
        # would wake the loop in the middle of the next serial call
        self.starts = LoopDeadlines(idle_cancel=True)
        self.pool = SpawnPool()
        self.calls = 0  # calls of this runner between spawn and end

    def poller(self, loop: asyncio.AbstractEventLoop) -> Poller:
        """The poller of this runner's calls on ``loop``."""
        poller = self._poller
        if poller is not None and poller.loop is loop:
            return poller
        # Why not while its loop runs: that loop serves calls in another thread, which may be
        # between taking the epoll and spawning into it; closing it there would pull it away.
        if poller is None or (poller.idle and not poller.loop.is_running()):
            if poller is not None:
                poller.close()  # of a loop this runner's calls have left (maybe closed)
            poller = self._poller = new_poller(loop)
            return poller
        return LoopPoller(loop)  # calls of this runner are running on another loop too

    def close(self) -> None:
        """Close what the runner keeps between calls (its poller's epoll, the sandbox rules'
        descriptors), once no call runs; a later call opens them again. Owners call it when
        they are done with the runner."""
        poller = self._poller
        if poller is not None and poller.idle:
            self._poller = None
            poller.close()
            self.sandbox.close()

    async def _spawner(self) -> Spawner:
        found = self.spawner
        if found is None:
            # The first call may compile the helper (once per machine): not on the loop.
            found = self.spawner = await asyncio.to_thread(spawner, self.spawn_mode)
        return found

    async def run(
        self, spec: SpawnSpec, payload: bytes, on_event: EventSink | None = None
    ) -> RunOutcome:
        """Run one call to its end. Cancelling the awaiting task kills the process group."""
        spawn = self.spawner
        if (
            spawn is not None
            and spawn.checks_entry
            and is_within(spec.entry, spec.root)
            and (spec.confine is None or is_within(spec.entry, spec.confine))
            and self._unconfined(spec)
        ):
            # The entry re-check in the helper, as it spawns: a path with no symlink on it is
            # its own canonical path, under the root by the comparison above (check_entry's
            # work in one C call, on every serial call's critical path).
            try:
                return await self._run(spec, spec.entry, payload, on_event, spawn, spec.env, None)
            except EntryUnverified:
                pass  # the full check says why (or passes: a symlink on the way, inside)
        check = check_entry(spec.entry, spec.root, spec.shown_root or spec.root, spec.confine)
        if check.problem is not None:
            return RunOutcome(Status.FAILED, error=ErrorInfo("entry_rejected", check.problem))
        spawn = self.spawner or await self._spawner()
        try:
            confinement = self.sandbox.for_call(spec, check.path, spawn)
        except SandboxUnavailable as exc:
            return RunOutcome(Status.FAILED, error=ErrorInfo(exc.code, exc.message))
        env, conf = spec.env, None
        if confinement is not None:
            env, conf = {**spec.env, **confinement.env}, confinement.conf
        try:
            return await self._run(spec, check.path, payload, on_event, spawn, env, conf, True)
        finally:
            if confinement is not None:
                confinement.release()

    def _unconfined(self, spec: SpawnSpec) -> bool:
        """Whether the call runs under profile none (the operator's default for its class, and
        no declaration of its own: no profile object to build)."""
        policy = self.sandbox
        if spec.sandbox is None:
            return policy.defaults.get(spec.skill_class, NONE) == NONE
        return policy.resolve(spec.sandbox, spec.skill_class).profile == NONE

    async def _run(
        self,
        spec: SpawnSpec,
        path: str,
        payload: bytes,
        on_event: EventSink | None,
        spawn: Spawner,
        env: Mapping[str, str],
        conf: tuple[int, ...] | None,
        checked: bool = False,
    ) -> RunOutcome:
        """The call, its entry checked (``checked``) or to be checked by the spawner."""
        record = self.record
        if self.supervise and (record is None or record.fd < 0):  # first call, or forked
            record = self.record = supervision().record(self.groups_dir)
            self.supervise = record is not None
        loop = asyncio.get_running_loop()
        poller = self.poller(loop)
        started_wall = time.time()
        started = time.monotonic_ns()
        self.calls += 1
        reaper = self.reaper
        # A sweep ending another call while this one spawns must not take its child for an
        # orphan: the spawn is noted as a running call before it starts.
        key = reaper.spawning() if reaper is not None else 0
        # The poller's quiet-start timer, made with its epoll on a loop's first call (where the
        # spawner can arm one), so that what a runner holds between calls does not vary.
        timer = poller.timer(spawn.quiet_timer)
        try:
            if self.calls == 1:  # alone: spawn right here (the helper adds the fds to the epoll:
                # the pidfd alone when the call starts quiet, and arms the poller's timer for
                # the end of the quiet start: no timer of the loop's made and cancelled per call)
                quiet = self.quiet_start
                timer = timer if quiet > 0 else -1
                child = spawn.spawn(
                    path,
                    spec.cwd,
                    env,
                    payload,
                    poller.fileno(),
                    conf,
                    quiet > 0,
                    not checked,
                    timer,
                    int(quiet * 1e9),
                )
            else:  # other calls run: the loop keeps serving them while the kernel spawns; a
                # quiet start would cost more than it saves (their calls last longer than it,
                # and each loop wake serves several calls already)
                quiet, timer = 0.0, -1
                child = await self.pool.spawn(
                    spawn, path, spec.cwd, env, payload, conf, not checked
                )
        except OSError as exc:
            self.calls -= 1
            if reaper is not None:
                reaper.call_ended(key)
            reason = exc.strerror or str(exc)
            return RunOutcome(
                Status.FAILED,
                error=ErrorInfo("spawn_failed", f"cannot start {path}: {reason}"),
                started_at=started_wall,
            )
        except BaseException:
            self.calls -= 1
            if reaper is not None:
                reaper.call_ended(key)
            raise
        pid = child.pid
        slot = record.add(pid) if record is not None else -1
        if reaper is not None:
            reaper.spawned(key, pid)
        call = ChildCall(self, loop, poller, child, payload, spec, on_event, quiet, timer)
        if record is not None:
            call.record, call.slot = record, slot
        known = record.known_children if record is not None else ()  # not orphans: the sentinel
        try:
            await call.done
        except BaseException:
            self.calls -= 1
            # Cancelled: the group is killed now; once the main process is reaped, sweep what it
            # left (its killed children were re-parented to us and must be reaped, and setsid
            # daemons killed). The call is no longer live for that sweep.
            sweep: Callable[[], object] | None = None
            if reaper is not None:
                reaper.call_ended(pid)
                sweep = functools.partial(reaper.sweep, pid, known)
            call.abandon(sweep)
            raise
        self.calls -= 1
        call.finish()
        orphans = 0
        if reaper is not None:
            reaper.call_ended(pid)
            orphans = reaper.sweep(pid, known)
        outcome = call.outcome()
        outcome.orphans_killed = orphans
        outcome.started_at = started_wall
        outcome.duration_ms = (time.monotonic_ns() - started) // 1000 / 1000  # whole µs
        return outcome
