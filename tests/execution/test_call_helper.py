"""The spawn helper's other half (``call_helper.c``): the entry re-check it does before spawning,
and the collection of a call at its exit, against real children.

Children are sh scripts written into tmp_path; each collection is made once the child's pidfd
says it exited, as the runner makes it.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
from pathlib import Path

import pytest

from ongrid_skills.execution.spawner import (
    WATCHED_TIMED,
    Child,
    EntryUnverified,
    HelperSpawner,
    spawner,
)
from tests.support.processes import alive, open_fds, open_fds_settled, pid_gone, read_pid
from tests.support.runner import canonical_dir, require_helper, write_executable
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux helper")


@pytest.fixture
def helper() -> HelperSpawner:
    require_helper()
    found = spawner("helper")
    assert isinstance(found, HelperSpawner)
    return found


def started(helper: HelperSpawner, script: Path, payload: bytes = b"{}") -> Child:
    """The script spawned and exited (its pidfd readable), nothing of it read or reaped."""
    child = helper.spawn(str(script), str(script.parent), {}, payload, -1)
    assert child.pidfd is not None
    select.select([child.pidfd], [], [], 15)
    return child


# ---- the entry re-check -------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    ["symlinked-entry", "symlinked-folder", "dot-dot", "double-slash", "directory", "no-x-bit"],
)
def test_an_entry_the_helper_must_check_is_not_spawned_unless_it_is_its_own_canonical_file(
    helper: HelperSpawner, tmp_path: Path, case: str
) -> None:
    root = canonical_dir(tmp_path / "root")
    real = write_executable(root / "skill" / "run", "#!/bin/sh\necho '{}'\n")
    (root / "via").symlink_to(root / "skill")
    (root / "link").symlink_to(real)
    os.mkdir(root / "folder.d")
    write_executable(root / "plain", "#!/bin/sh\necho '{}'\n", mode=0o644)
    path = {
        "symlinked-entry": f"{root}/link",
        "symlinked-folder": f"{root}/via/run",
        "dot-dot": f"{root}/via/../skill/run",
        "double-slash": f"{root}/skill//run",
        "directory": f"{root}/folder.d",
        "no-x-bit": f"{root}/plain",
    }[case]
    before = open_fds_settled()
    with pytest.raises(EntryUnverified):
        helper.spawn(path, str(root), {}, b"{}", -1, check=True)
    assert open_fds() == before  # no pipe made, nothing started


def test_an_entry_that_is_its_own_canonical_path_is_checked_and_spawned_in_one_call(
    helper: HelperSpawner, tmp_path: Path
) -> None:
    root = canonical_dir(tmp_path / "root")
    entry = write_executable(root / "skill" / "run", "#!/bin/sh\ncat\n")
    child = helper.spawn(str(entry), str(entry.parent), {}, b'{"checked": true}', -1, check=True)
    assert child.pidfd is not None
    select.select([child.pidfd], [], [], 15)
    out, err, out_eof, err_eof, reaped, code = helper.collect(
        child, child.pidfd, child.stdout, child.stderr, 1 << 20, None
    )
    assert (out, err, out_eof, err_eof, reaped, code) == (
        b'{"checked": true}',
        b"",
        True,
        True,
        True,
        0,
    )


# ---- the collection at the exit ---------------------------------------------------------------


def test_collect_hands_back_both_pipes_then_kills_the_group_clears_the_slot_and_reaps(
    helper: HelperSpawner, tmp_path: Path
) -> None:
    # A leftover of the group that closed its pipes is killed; the exit status comes back.
    script = write_executable(
        tmp_path / "skill" / "run",
        "#!/bin/sh\nsh -c 'echo $$ > bg.tmp; mv bg.tmp bg.pid; exec sleep 30' >/dev/null 2>&1 &\n"
        "while [ ! -e bg.pid ]; do sleep 0.01; done\n"  # its pipes are closed by now
        "echo '{\"ok\": 1}'\necho 'a line' >&2\nexit 3\n",
    )
    before = open_fds_settled()
    child = started(helper, script)
    slot = ctypes.c_long(child.pid)  # a group record slot, as the runner passes its address
    got = helper.collect(
        child, child.pidfd or -1, child.stdout, child.stderr, 1 << 20, ctypes.addressof(slot)
    )
    assert got == (b'{"ok": 1}\n', b"a line\n", True, True, True, 3)
    assert slot.value == 0
    assert pid_gone(child.pid)  # reaped
    assert open_fds() == before  # both pipes and the pidfd closed
    background = wait_for(lambda: read_pid(script.parent / "bg.pid"), "the leftover's pid")
    wait_for(lambda: not alive(background), "the group's leftover to die")


def test_collect_reports_death_by_signal_as_a_negative_return_code(
    helper: HelperSpawner, tmp_path: Path
) -> None:
    script = write_executable(tmp_path / "skill" / "run", "#!/bin/sh\nkill -SEGV $$\n")
    child = started(helper, script)
    got = helper.collect(child, child.pidfd or -1, child.stdout, child.stderr, 1 << 20, None)
    assert got[4:] == (True, -signal.SIGSEGV)


def test_collect_kills_and_reaps_nothing_while_a_descendant_still_holds_a_pipe(
    helper: HelperSpawner, tmp_path: Path
) -> None:
    script = write_executable(
        tmp_path / "skill" / "run", "#!/bin/sh\necho '{}'\nsleep 30 &\necho $! > bg.pid\n"
    )
    child = started(helper, script)
    slot = ctypes.c_long(child.pid)
    out, _err, out_eof, err_eof, reaped, code = helper.collect(
        child, child.pidfd or -1, child.stdout, child.stderr, 1 << 20, ctypes.addressof(slot)
    )
    assert (out, out_eof, err_eof, reaped, code) == (b"{}\n", False, False, False, None)
    assert slot.value == child.pid  # still recorded: the call is not over
    assert not pid_gone(child.pid)  # an unreaped zombie: its group id is still ours
    background = wait_for(lambda: read_pid(script.parent / "bg.pid"), "the descendant's pid")
    assert not pid_gone(background)
    os.killpg(child.pid, signal.SIGKILL)
    os.waitpid(child.pid, 0)
    for fd in (child.stdout, child.stderr, child.pidfd):
        if fd is not None:
            os.close(fd)


def test_collect_reads_no_more_stdout_than_the_room_it_is_given(
    helper: HelperSpawner, tmp_path: Path
) -> None:
    script = write_executable(tmp_path / "skill" / "run", "#!/bin/sh\necho 0123456789abcdef\n")
    child = started(helper, script)
    out, _err, out_eof, err_eof, reaped, _code = helper.collect(
        child, child.pidfd or -1, child.stdout, child.stderr, 10, None
    )
    assert (out, out_eof, err_eof, reaped) == (b"0123456789", False, True, False)
    assert os.read(child.stdout, 100) == b"abcdef\n"  # the rest is left in the pipe
    os.close(child.stdout)
    os.waitpid(child.pid, 0)
    if child.pidfd is not None:
        os.close(child.pidfd)


def test_spawns_in_turn_from_two_folders_each_run_in_their_own_folder(
    helper: HelperSpawner, tmp_path: Path
) -> None:
    # The helper keeps a thread's last file actions for the next spawn with the same
    # descriptors: the folder must still be each call's own.
    scripts = [
        write_executable(tmp_path / name / "run", "#!/bin/sh\npwd\n") for name in ("one", "two")
    ]
    for script in scripts * 3:
        child = started(helper, script)
        got = helper.collect(child, child.pidfd or -1, child.stdout, child.stderr, 1 << 20, None)
        assert got[0] == f"{os.path.realpath(script.parent)}\n".encode()


# ---- the quiet start's timer ----------------------------------------------------------------


def test_a_quiet_spawn_arms_the_timer_it_is_given_and_collect_disarms_it(
    helper: HelperSpawner, tmp_path: Path
) -> None:
    # The end of a quiet start without a timer of the event loop's: the helper arms the
    # runner's timerfd as it spawns; a call collected before it expires leaves it quiet.
    script = write_executable(tmp_path / "skill" / "run", "#!/bin/sh\necho '{}'\n")
    timer = helper.quiet_timer()
    assert timer >= 0
    epoll = select.epoll()
    try:
        for collected_in_time in (True, False):
            child = helper.spawn(
                str(script), str(script.parent), {}, b"{}", epoll.fileno(), None, True, False,
                timer, 50_000_000,
            )  # fmt: skip
            assert child.watched == WATCHED_TIMED
            assert child.pidfd is not None
            if collected_in_time:
                select.select([child.pidfd], [], [], 15)
                got = helper.collect(
                    child, child.pidfd, child.stdout, child.stderr, 1 << 20, None, timer
                )
                assert got[4] is True
                assert select.select([timer], [], [], 0.2)[0] == []  # disarmed: never expires
            else:
                assert select.select([timer], [], [], 5)[0] == [timer]  # expired
                assert len(os.read(timer, 8)) == 8
                select.select([child.pidfd], [], [], 15)
                helper.collect(child, child.pidfd, child.stdout, child.stderr, 1 << 20, None)
    finally:
        epoll.close()
        os.close(timer)
