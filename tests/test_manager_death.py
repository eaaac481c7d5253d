"""A skill dies with its manager: ``kill -9`` of a real ``ongrid-skills serve`` mid-call.

The skill records its own pid and a grandchild's, then waits. After the server is killed, its
sentinel must kill both (and go away itself); if the sentinel was killed first, the next server
on the same data dir must kill them at start-up, before it answers, and the row is `interrupted`.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.types import Role
from tests.support.processes import read_pid
from tests.support.skills import MakeSkill
from tests.support.waiting import wait_for
from tests.test_runtime import Api, create_tokens, serving

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")

# Starts a grandchild, records both pids (atomically), then waits for the grandchild forever.
SLEEPER = """#!/bin/sh
cat >/dev/null
sleep 300 &
echo $! > gc.tmp && mv gc.tmp gc.pid
echo $$ > main.tmp && mv main.tmp main.pid
wait
"""
DEADLINE = 10.0


def state(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()[0].decode()


def dead(pid: int) -> bool:
    """Gone, or a zombie (then reaped if it was re-parented to this test process)."""
    if state(pid) in (None, "Z", "X"):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return True
    return False


def wait_dead(*pids: int, timeout: float = DEADLINE) -> None:
    wait_for(lambda: all(dead(p) for p in pids), f"pids {pids} to die", timeout)


def sentinel_of(pid: int) -> int | None:
    """The sentinel child of a server process, if it has one."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                if b"sentinel.py" in cmdline:
                    return int(child)
    return None


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids to kill at the end whatever happened, so a failing test leaves nothing running."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def start_sleeper(api: Api, folder: Path, leftovers: list[int]) -> tuple[str, int, int]:
    """Start the skill without waiting; its execution id, main pid and grandchild pid."""
    response = api.call("POST", "/v1/skills/sleeper/execute", "olga", json={"wait": False})
    assert response.status_code == 202, response.text
    main = wait_for(lambda: read_pid(folder / "main.pid"), "the skill to start")
    grandchild = read_pid(folder / "gc.pid")
    assert grandchild is not None
    leftovers += [main, grandchild]
    return response.json()["id"], main, grandchild


def records_in(data_dir: Path) -> list[str]:
    groups = data_dir / "groups"
    return sorted(os.listdir(groups)) if groups.is_dir() else []


def test_kill_9_of_the_server_kills_the_running_skill_and_its_grandchild(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, leftovers: list[int]
) -> None:
    folder = make_skill("sleeper", SLEEPER, timeout_seconds=300)
    data_dir = tmp_path / "data"
    tokens = create_tokens(data_dir, olga=Role.OPERATOR)

    with serving(data_dir, skills_root, tokens) as api:
        call_id, main, grandchild = start_sleeper(api, folder, leftovers)
        server = api.serve.proc
        sentinel = sentinel_of(server.pid)
        recorded = records_in(data_dir)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=DEADLINE)

        wait_dead(main, grandchild)
        assert len(recorded) == 1
        assert sentinel is not None
        leftovers.append(sentinel)
        wait_dead(sentinel)  # it never outlives the manager, and leaves no zombie behind
        wait_for(lambda: not records_in(data_dir), "the sentinel to remove its record")

    with serving(data_dir, skills_root, tokens) as api:
        after = api.execution(call_id)
        assert after["status"] == "interrupted"
        assert after["error"]["code"] == "interrupted"


def test_a_skill_left_by_a_server_whose_sentinel_died_too_is_killed_at_the_next_start(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, leftovers: list[int]
) -> None:
    folder = make_skill("sleeper", SLEEPER, timeout_seconds=300)
    data_dir = tmp_path / "data"
    tokens = create_tokens(data_dir, olga=Role.OPERATOR)

    with serving(data_dir, skills_root, tokens) as api:
        call_id, main, grandchild = start_sleeper(api, folder, leftovers)
        server = api.serve.proc
        sentinel = sentinel_of(server.pid)
        if sentinel is not None:
            os.kill(sentinel, signal.SIGKILL)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=DEADLINE)
        if sentinel is not None:
            wait_dead(sentinel)
    # Nobody is left to kill the skill: it runs on, unsupervised, with its record on disk.
    assert not dead(main)
    assert not dead(grandchild)
    assert len(records_in(data_dir)) == 1

    with serving(data_dir, skills_root, tokens) as api:
        # Recovery ran before the server answered: the skill is already dead (or a zombie).
        assert dead(main)
        wait_dead(grandchild, timeout=1.0)
        after = api.execution(call_id)
        assert after["status"] == "interrupted"
        assert after["error"]["code"] == "interrupted"
        assert not any(name.split(".")[1] == str(server.pid) for name in records_in(data_dir))


def test_the_sentinel_ends_with_a_server_stopped_gracefully(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, leftovers: list[int]
) -> None:
    folder = make_skill("sleeper", SLEEPER, timeout_seconds=300)
    data_dir = tmp_path / "data"
    tokens = create_tokens(data_dir, olga=Role.OPERATOR)

    with serving(data_dir, skills_root, tokens) as api:
        _call_id, main, grandchild = start_sleeper(api, folder, leftovers)
        sentinel = sentinel_of(api.serve.proc.pid)
        assert sentinel is not None
        leftovers.append(sentinel)
    # serving() stopped the server with SIGTERM: it killed its calls, then exited.
    wait_dead(main, grandchild, sentinel)
    assert records_in(data_dir) == []
