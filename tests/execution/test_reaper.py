"""The orphan sweeper on its own, with real processes (Linux child subreaper).

Each test plays the runner's part by hand: it starts a "call" as a child in a new session, tells
the reaper when the call starts and ends, and checks which processes the sweep kills. A sweep may
also collect unrelated orphans left by other tests, so the tests check processes, not only counts.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.builtins import processes
from ongrid_skills.builtins.processes import started_here
from ongrid_skills.execution.reaper import OrphanReaper
from tests.support.processes import alive, kill_quietly, pid_gone, proc_stat
from tests.support.runner import assert_gone, canonical_dir, read_int_file
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux subreaper")

DAEMON = (
    "setsid sh -c 'echo $$ > {name}.tmp; mv {name}.tmp {name}.pid; exec sleep 30' "
    "</dev/null >/dev/null 2>&1 &\n"
    "while [ ! -e {name}.pid ]; do :; done\n"
)


@pytest.fixture
def reaper() -> OrphanReaper:
    reaper = OrphanReaper()
    if not reaper.enabled:
        pytest.skip("cannot become a child subreaper here")
    return reaper


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return canonical_dir(tmp_path / "work")


Held = int | subprocess.Popen[bytes]


@pytest.fixture
def cleanup() -> Iterator[list[Held]]:
    """Processes (pids, or the Popen objects of our children) to SIGKILL at the end of the test,
    whatever happened."""
    held: list[Held] = []
    yield held
    for item in held:
        kill_quietly(item if isinstance(item, int) else item.pid)
    for item in held:
        if isinstance(item, subprocess.Popen):
            item.wait()
            continue
        # Reap what is ours; ignore what is not (or was already reaped).
        with contextlib.suppress(ChildProcessError):
            os.waitpid(item, 0)


def start_call(script: str, cwd: Path) -> subprocess.Popen[bytes]:
    """A call's main process as the runner starts it: its own session, no shell of ours."""
    return subprocess.Popen(
        ["/bin/sh", "-c", script],
        cwd=cwd,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def parent_of(pid: int) -> int | None:
    info = proc_stat(pid)
    return None if info is None else info[1]


def session_of(pid: int) -> int | None:
    info = proc_stat(pid)
    return None if info is None else info[3]


def test_the_sweep_does_not_kill_a_process_in_the_managers_own_session(
    reaper: OrphanReaper, cleanup: list[Held]
) -> None:
    mine = subprocess.Popen(["sleep", "30"])  # e.g. a helper the manager started itself
    cleanup.append(mine)
    assert session_of(mine.pid) == reaper.own_sid
    reaper.sweep(mine.pid)  # even when its pid is passed as the ending call's
    reaper.sweep(12345678)
    assert alive(mine.pid)
    assert mine.poll() is None


def test_the_sweep_spares_a_process_a_built_in_started_in_a_session_of_its_own(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    # What read_journal does with journalctl: a session of its own, so its group can be killed.
    with started_here() as name:
        tool = subprocess.Popen(["sleep", "30"], start_new_session=True)
        cleanup.append(tool)
        name(tool.pid)
        started = proc_stat(tool.pid)
        assert started is not None and started[3] == tool.pid != reaper.own_sid
        ended = start_call("exit 0", work)  # a call that ends after the tool started
        ended.wait()
        assert reaper.sweep(ended.pid) == 0  # named: spared
        assert tool.pid in processes.pids()
        assert alive(tool.pid) and tool.poll() is None
    assert tool.pid not in processes.pids()
    assert reaper.sweep(ended.pid) >= 1  # once its built-in is done, an orphan like any other
    assert_gone(tool.pid)


def test_a_child_started_while_a_built_in_starts_one_is_spared_until_its_pid_is_named(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    with started_here():  # a built-in between "about to start" and knowing the pid
        other = subprocess.Popen(["sleep", "30"], start_new_session=True)
        cleanup.append(other)
        ended = start_call("exit 0", work)
        ended.wait()
        assert reaper.sweep(ended.pid) == 0
        assert alive(other.pid)


def test_the_sweep_does_not_kill_a_live_calls_main_process_nor_its_descendants(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    # The live call's main process outlives an intermediate shell whose child thereby becomes
    # an orphan of ours while still in the live call's session.
    live = start_call(
        "sh -c 'sleep 30 & echo $! > gc.tmp; mv gc.tmp gc.pid'\nexec sleep 30\n", work
    )
    cleanup.append(live)
    reaper.call_started(live.pid)
    try:
        grandchild = read_int_file(work / "gc.pid")
        cleanup.append(grandchild)
        wait_for(lambda: parent_of(grandchild) == os.getpid(), what="the re-parenting to us")
        ended = start_call("exit 0", work)
        ended.wait()
        reaper.sweep(ended.pid)
        assert alive(live.pid)
        assert alive(grandchild)
        assert session_of(grandchild) == live.pid
    finally:
        reaper.call_ended(live.pid)


def test_the_sweep_kills_a_setsid_orphan_attributable_to_the_ending_call(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    call = start_call(DAEMON.format(name="daemon"), work)
    reaper.call_started(call.pid)
    daemon = read_int_file(work / "daemon.pid")
    cleanup.append(daemon)
    assert call.wait(timeout=10) == 0
    reaper.call_ended(call.pid)
    info = proc_stat(daemon)
    assert info is not None
    assert info[3] == daemon != call.pid  # in a session of its own: killpg cannot reach it
    assert info[1] != call.pid  # re-parented to us, the subreaper
    assert reaper.sweep(call.pid) >= 1
    assert_gone(daemon)


def test_the_sweep_kills_a_background_child_left_in_the_ending_calls_session(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    call = start_call("sleep 30 & echo $! > bg.tmp; mv bg.tmp bg.pid\n", work)
    reaper.call_started(call.pid)
    child = read_int_file(work / "bg.pid")
    cleanup.append(child)
    call.wait(timeout=10)
    reaper.call_ended(call.pid)
    assert session_of(child) == call.pid
    assert reaper.sweep(call.pid) >= 1
    assert_gone(child)


def test_the_sweep_kills_a_daemon_together_with_the_workers_it_forked(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    script = (
        "setsid sh -c 'sleep 30 & echo $! > w1.tmp; mv w1.tmp w1.pid; "
        "(sleep 30 & echo $! > w2.tmp; mv w2.tmp w2.pid; wait) & wait' "
        "</dev/null >/dev/null 2>&1 &\n"
        "while [ ! -e w2.pid ] || [ ! -e w1.pid ]; do :; done\n"
    )
    call = start_call(script, work)
    reaper.call_started(call.pid)
    workers = [read_int_file(work / "w1.pid"), read_int_file(work / "w2.pid")]
    cleanup.extend(workers)
    call.wait(timeout=10)
    reaper.call_ended(call.pid)
    assert all(alive(pid) for pid in workers)
    assert reaper.sweep(call.pid) >= 3  # the daemon shell, a subshell, two workers
    assert_gone(*workers)


def test_an_orphan_that_may_belong_to_a_running_call_is_left_for_a_later_sweep(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    running = start_call("exec sleep 30\n", work)
    cleanup.append(running)
    reaper.call_started(running.pid)
    ended = start_call(DAEMON.format(name="late"), work)
    reaper.call_started(ended.pid)
    daemon = read_int_file(work / "late.pid")
    cleanup.append(daemon)
    ended.wait(timeout=10)
    reaper.call_ended(ended.pid)
    # The daemon is in a session of its own and started after `running` began: it could be
    # that call's, so this sweep must not kill it.
    reaper.sweep(ended.pid)
    assert alive(daemon)
    assert alive(running.pid)
    # Once no call is running any more, the next sweep takes it.
    running.kill()
    running.wait()
    reaper.call_ended(running.pid)
    assert reaper.sweep(running.pid) >= 1
    assert_gone(daemon)
    assert pid_gone(running.pid)


def test_a_child_started_while_a_spawn_is_noted_is_not_swept_before_its_pid_is_known(
    reaper: OrphanReaper, work: Path, cleanup: list[Held]
) -> None:
    # The runner spawns in a worker thread while other calls run: until the spawn returns, the
    # new call's main process is a child in a session of its own that no running call names.
    key = reaper.spawning()
    spawned = start_call("exec sleep 30\n", work)
    cleanup.append(spawned)
    ended = start_call("exit 0", work)
    reaper.call_started(ended.pid)
    ended.wait(timeout=10)
    reaper.call_ended(ended.pid)
    reaper.sweep(ended.pid)
    assert alive(spawned.pid)
    reaper.spawned(key, spawned.pid)
    assert spawned.pid in reaper.live and key not in reaper.live
    reaper.sweep(ended.pid)
    assert alive(spawned.pid)  # a running call now
    reaper.call_ended(spawned.pid)
    spawned.kill()
    spawned.wait()
