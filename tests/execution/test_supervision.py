"""Children die with their manager: group records, the sentinel and start-up recovery.

Real processes throughout. A "manager" here is a small Python program that runs calls through a
``SubprocessRunner`` and is then killed with SIGKILL; the skills it started record their pids.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.execution import sentinel
from ongrid_skills.execution.runner import SubprocessRunner
from ongrid_skills.execution.sentinel import encode_slots, parse_record, slot_words
from ongrid_skills.execution.supervision import (
    SUFFIX,
    boot_id,
    kill_left_behind,
    record_path,
    supervision,
)
from tests.support.processes import proc_stat
from tests.support.runner import (
    canonical_dir,
    read_int_file,
    script_skill,
    spec_for,
    wait_for,
    write_executable,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

SLEEPER = """#!/bin/sh
sleep 300 &
echo $! > gc.tmp && mv gc.tmp gc.pid
echo $$ > main.tmp && mv main.tmp main.pid
wait
"""
# Exits, leaving a child forked well after the spawn that still holds stdout.
LINGERER = """#!/bin/sh
sleep 0.3
sleep 300 &
echo $! > gc.tmp && mv gc.tmp gc.pid
echo $$ > main.tmp && mv main.tmp main.pid
"""
# A stand-in manager: MODE "replace", "fork" or "linger"; see the tests.
MANAGER = """
import asyncio, os, sys, time
from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner
from ongrid_skills.execution.supervision import supervision

root, groups, mode = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(root, "manager.pid"), "w") as fh:
    fh.write(f"{os.getpid()}\\n")
runner = SubprocessRunner(groups_dir=groups, kill_grace=300.0, linger=300.0)

def spec(folder, timeout=300.0):
    d = os.path.join(root, folder)
    return SpawnSpec(os.path.join(d, "run"), root, d, {}, timeout)

def wait_file(name):
    while not os.path.exists(os.path.join(root, name)):
        time.sleep(0.01)

def publish(name, value):
    with open(os.path.join(root, name + ".tmp"), "w") as fh:
        fh.write(f"{value}\\n")
    os.rename(os.path.join(root, name + ".tmp"), os.path.join(root, name))

async def main():
    if mode == "linger":
        first = asyncio.ensure_future(runner.run(spec("c"), b"{}"))
        await asyncio.to_thread(wait_file, "c/main.pid")
        publish("sentinel", supervision().sentinel_pid)
        await asyncio.sleep(300)
    first = asyncio.ensure_future(runner.run(spec("a"), b"{}"))
    await asyncio.to_thread(wait_file, "a/main.pid")
    publish("sentinel", supervision().sentinel_pid)
    if mode == "fork":
        child = os.fork()
        if child == 0:
            time.sleep(300)
            os._exit(0)
        publish("forked", child)
    else:
        await asyncio.to_thread(wait_file, "go")
        old = supervision().sentinel_pid
        deadline = time.monotonic() + 10
        while supervision().sentinel_pid == old and time.monotonic() < deadline:
            await runner.run(spec("quick"), b"{}")
        publish("sentinel2", supervision().sentinel_pid)
        second = asyncio.ensure_future(runner.run(spec("b"), b"{}"))
    await asyncio.sleep(300)

asyncio.run(main())
"""


# The manager's parent, standing in for init: a child subreaper that reaps at once whatever is
# re-parented to it (so a dead manager's zombies vanish as they would on a real host).
INIT = """
import ctypes, subprocess, sys, os
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
subprocess.Popen(sys.argv[1:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
"""


def dead(pid: int) -> bool:
    """Gone, or a zombie (then reaped if it was re-parented to this test process)."""
    info = proc_stat(pid)
    if info is None or info[0] in ("Z", "X"):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return True
    return False


def wait_dead(*pids: int, timeout: float = 10.0) -> None:
    wait_for(lambda: all(dead(p) for p in pids), f"pids {pids} to die", timeout)


#: The processes the running test started itself (stand-in inits, sessions).
SHIMS: list[subprocess.Popen[bytes]] = []


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids to SIGKILL at the end, whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    while SHIMS:
        SHIMS.pop().wait(timeout=10)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return canonical_dir(tmp_path / "skills")


def start_manager(root: Path, groups: Path, mode: str, leftovers: list[int]) -> int:
    """Start the stand-in manager under the stand-in init; the manager's pid."""
    for folder in ("a", "b"):
        write_executable(root / folder / "run", SLEEPER)
    write_executable(root / "c" / "run", LINGERER)
    write_executable(root / "quick" / "run", "#!/bin/sh\necho '{}'\n")
    program = write_executable(root.parent / "manager.py", MANAGER)
    init = write_executable(root.parent / "init.py", INIT)
    shim = subprocess.Popen(
        [sys.executable, str(init), sys.executable, str(program), str(root), str(groups), mode],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    SHIMS.append(shim)  # waited for at the end of the test (see ``leftovers``)
    leftovers.append(shim.pid)
    manager = read_int_file(root / "manager.pid", 20)
    leftovers.append(manager)
    return manager


def kill_manager(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_dead(pid)


def skill_pids(folder: Path, leftovers: list[int]) -> list[int]:
    pids = [read_int_file(folder / "main.pid", 20), read_int_file(folder / "gc.pid", 20)]
    leftovers += pids
    return pids


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


# ---- the sentinel -----------------------------------------------------------------------------


def test_a_sentinel_killed_while_the_manager_runs_is_replaced_and_still_kills_every_call(
    root: Path, tmp_path: Path, leftovers: list[int]
) -> None:
    manager = start_manager(root, tmp_path / "groups", "replace", leftovers)
    first = skill_pids(root / "a", leftovers)
    sentinel = read_int_file(root / "sentinel", 20)
    os.kill(sentinel, signal.SIGKILL)
    (root / "go").touch()
    replacement = read_int_file(root / "sentinel2", 20)
    leftovers.append(replacement)
    second = skill_pids(root / "b", leftovers)
    assert replacement != sentinel
    assert not any(dead(p) for p in first + second)

    kill_manager(manager)

    wait_dead(*first, *second, replacement)
    assert os.listdir(tmp_path / "groups") == []


def test_a_child_the_manager_forked_does_not_keep_the_sentinel_waiting(
    root: Path, tmp_path: Path, leftovers: list[int]
) -> None:
    manager = start_manager(root, tmp_path / "groups", "fork", leftovers)
    pids = skill_pids(root / "a", leftovers)
    forked = read_int_file(root / "forked", 20)
    sentinel = read_int_file(root / "sentinel", 20)
    leftovers += [forked, sentinel]

    kill_manager(manager)

    wait_dead(*pids, sentinel)
    assert not dead(forked)  # alive, and it did not hold the manager's end of the pipe


def test_a_child_left_by_an_exited_main_process_dies_with_the_manager(
    root: Path, tmp_path: Path, leftovers: list[int]
) -> None:
    manager = start_manager(root, tmp_path / "groups", "linger", leftovers)
    main, child = skill_pids(root / "c", leftovers)
    leftovers.append(read_int_file(root / "sentinel", 20))
    # The main process has exited (a zombie until the call ends); its child, forked after the
    # spawn was recorded, holds stdout. Once the manager dies, the zombie is reaped at once.
    wait_for(lambda: (proc_stat(main) or ("Z",))[0] == "Z", "the main process to exit", 20)
    assert not dead(child)

    kill_manager(manager)

    wait_dead(child)


def test_many_calls_leave_the_record_blank_and_small_and_the_sentinel_unchanged(
    root: Path, tmp_path: Path
) -> None:
    groups = tmp_path / "groups"
    runner = SubprocessRunner(groups_dir=str(groups), kill_grace=0.1, linger=0.05)
    ok = script_skill(root, "#!/bin/sh\ncat >/dev/null\necho '{}'\n", folder="ok")
    fail = script_skill(root, "#!/bin/sh\nexit 3\n", folder="fail")
    hang = script_skill(root, "#!/bin/sh\nexec sleep 30\n", folder="hang", timeout=0.05)

    async def calls(n: int) -> None:
        await runner.run(ok, b"{}")
        for _ in range(n):
            await asyncio.gather(*(runner.run(ok, b"{}") for _ in range(8)))
            await runner.run(fail, b"{}")
        await runner.run(hang, b"{}")

    asyncio.run(calls(1))
    sentinel = supervision().sentinel_pid
    assert sentinel is not None
    record = runner.record
    assert record is not None and record.path is not None
    rss_before = rss_kib(sentinel)

    asyncio.run(calls(40))

    assert supervision().sentinel_pid == sentinel
    assert record.live == 0
    data = Path(record.path).read_bytes()
    assert parse_record(data) == []
    used = [slot for slot in slot_words(data) if slot != (0, 0)]
    assert 1 <= len(used) <= 9  # one slot per call running at once, reused
    assert all(sid == 0 for sid, _ticks in used)
    assert rss_kib(sentinel) <= rss_before + 64


def test_a_record_grows_past_a_page_of_slots_and_reads_back_exactly(tmp_path: Path) -> None:
    record = supervision().record(str(tmp_path / "groups"))
    assert record is not None and record.path is not None
    beyond_pid_max = (1 << 22) + 1  # no process has these ids: nothing to kill if we die now
    slots = [record.add(beyond_pid_max + i) for i in range(600)]
    recorded = sentinel.read_record(record.path)
    assert sorted(r.sid for r in recorded) == [beyond_pid_max + i for i in range(600)]
    for slot in slots[::2]:
        record.remove(slot)
    assert record.live == 300
    for slot in slots[1::2]:
        record.remove(slot)
    assert record.live == 0
    assert len(set(slots)) == 600


# ---- start-up recovery --------------------------------------------------------------------------


def session(script: str, cwd: Path) -> subprocess.Popen[bytes]:
    """A call's main process as the runner starts it: a new session (waited for at the end of
    the test, see ``leftovers``)."""
    proc = subprocess.Popen(["/bin/sh", "-c", script], cwd=cwd, start_new_session=True)
    SHIMS.append(proc)
    return proc


def start_ticks(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2 :].split()[19])


def write_record(groups: Path, name: str, slots: list[tuple[int, int]]) -> Path:
    groups.mkdir(parents=True, exist_ok=True)
    path = groups / name
    path.write_bytes(encode_slots(slots))
    return path


def test_recovery_kills_a_dead_managers_sessions_and_only_those_it_can_prove(
    tmp_path: Path, leftovers: list[int]
) -> None:
    work = canonical_dir(tmp_path / "work")
    # A call with job control: its background job is a group of its own in the call's session.
    recorded = session("set -m; sleep 300 & echo $! > job.pid; wait", work)
    # Same number range, but started after the time its slot claims: a reused id, not ours.
    stranger = session("exec sleep 300", work)
    leftovers += [recorded.pid, stranger.pid]
    job = read_int_file(work / "job.pid")
    leftovers.append(job)
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    record = write_record(
        tmp_path / "groups",
        f"{boot_id()}.{gone.pid}.1{SUFFIX}",
        [(recorded.pid, start_ticks(recorded.pid)), (stranger.pid, start_ticks(stranger.pid) - 1)],
    )

    killed = kill_left_behind(str(tmp_path / "groups"), grace=0.5)

    assert killed == 1
    wait_dead(recorded.pid, job)
    assert not dead(stranger.pid)
    assert not record.exists()


def test_recovery_leaves_the_record_of_a_live_manager_alone_and_drops_an_earlier_boots(
    tmp_path: Path, leftovers: list[int]
) -> None:
    work = canonical_dir(tmp_path / "work")
    call = session("exec sleep 300", work)
    leftovers.append(call.pid)
    groups = tmp_path / "groups"
    slot = [(call.pid, start_ticks(call.pid))]
    mine = write_record(groups, Path(record_path(str(groups))).name, slot)
    earlier = write_record(groups, f"00000000-0000-0000-0000-000000000000.1.1{SUFFIX}", slot)

    assert kill_left_behind(str(groups), grace=0.5) == 0

    assert not dead(call.pid)
    assert mine.exists()
    assert not earlier.exists()


def test_a_call_running_in_this_process_survives_recovery_on_its_data_dir(
    root: Path, tmp_path: Path
) -> None:
    groups = tmp_path / "groups"
    runner = SubprocessRunner(groups_dir=str(groups), kill_grace=0.1, linger=0.05)
    entry = write_executable(root / "sleeper" / "run", SLEEPER)
    spec = spec_for(root, entry, timeout=30)

    async def scenario() -> tuple[int, int]:
        call = asyncio.ensure_future(runner.run(spec, b"{}"))
        main = await asyncio.to_thread(read_int_file, root / "sleeper" / "main.pid", 20)
        killed = await asyncio.to_thread(kill_left_behind, str(groups), 0.5)
        alive = not dead(main)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        return killed, alive

    killed, alive = asyncio.run(scenario())
    assert (killed, alive) == (0, True)
