"""Real executables in tmp_path, a synchronous way to run one call, and /proc probes.

Nothing here sleeps to wait for something: every wait polls a condition against a monotonic
deadline and fails loudly when the deadline passes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ongrid_skills.execution.records import Event
from ongrid_skills.execution.runner import RunOutcome, SpawnSpec, SubprocessRunner

#: An interpreter usable from a shebang without any environment (the child gets none).
PYTHON = os.path.realpath(sys.executable)
POLL_SECONDS = 0.005


def canonical_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return Path(os.path.realpath(path))


def write_executable(path: Path, body: str | bytes, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(body, str):
        path.write_text(body)
    else:
        path.write_bytes(body)
    path.chmod(mode)
    return path


def spec_for(
    root: Path,
    entry: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 5.0,
) -> SpawnSpec:
    """The SpawnSpec the service would build for ``entry`` (canonical) under ``root``."""
    return SpawnSpec(
        entry=str(entry),
        root=str(root),
        cwd=str(entry.parent),
        env=dict(env or {}),
        timeout_seconds=timeout,
        shown_root=str(root),
    )


def script_skill(
    root: Path,
    body: str | bytes,
    *,
    folder: str = "skill",
    name: str = "run",
    env: Mapping[str, str] | None = None,
    timeout: float = 5.0,
    mode: int = 0o755,
) -> SpawnSpec:
    """Write ``body`` as ``root/folder/name`` and return its SpawnSpec."""
    entry = write_executable(root / folder / name, body, mode)
    return spec_for(root, entry, env=env, timeout=timeout)


def python_skill(
    root: Path,
    code: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 5.0,
) -> SpawnSpec:
    """A Python child (absolute shebang: it runs without PATH or any other variable)."""
    return script_skill(root, f"#!{PYTHON} -S\n{code}", env=env, timeout=timeout)


def compile_c(source: str, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_name(out.name + ".c")
    src.write_text(source)
    subprocess.run(
        ["gcc", "-O1", "-o", str(out), str(src)], check=True, capture_output=True, timeout=60
    )
    src.unlink()
    return out


def install_binary(
    root: Path,
    binary: Path,
    *,
    folder: str = "skill",
    env: Mapping[str, str] | None = None,
    timeout: float = 5.0,
) -> SpawnSpec:
    """Copy a compiled program into ``root/folder/run`` and return its SpawnSpec."""
    entry = root / folder / "run"
    entry.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, entry)
    return spec_for(root, entry, env=env, timeout=timeout)


@dataclass
class Call:
    outcome: RunOutcome
    events: list[Event] = field(default_factory=list)
    elapsed: float = 0.0

    def of_type(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.type == kind]

    def stderr_lines(self) -> list[str]:
        return [e.data["line"] for e in self.of_type("stderr")]


def run_call(
    runner: SubprocessRunner,
    spec: SpawnSpec,
    payload: bytes = b"{}",
    on_event: Callable[[Event], None] | None = None,
) -> Call:
    """Run one call in a fresh event loop; collect its events and the wall time it took."""
    events: list[Event] = []

    def sink(event: Event) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    started = time.monotonic()
    outcome = asyncio.run(runner.run(spec, payload, sink))
    return Call(outcome, events, time.monotonic() - started)


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL_SECONDS)


async def async_wait_for(
    predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition"
) -> None:
    """Like :func:`wait_for`, but lets the event loop run between polls."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


def read_int_file(path: Path, timeout: float = 5.0) -> int:
    """Wait until ``path`` holds a complete line with an integer (a pid), and return it."""
    holder: list[int] = []

    def ready() -> bool:
        try:
            text = path.read_text()
        except FileNotFoundError:
            return False
        if not text.endswith("\n"):
            return False
        holder.append(int(text.split()[0]))
        return True

    wait_for(ready, timeout, f"an integer in {path}")
    return holder[-1]


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


def assert_gone(*pids: int, timeout: float = 3.0) -> None:
    wait_for(lambda: all(pid_gone(p) for p in pids), timeout, f"pids {pids} to be reaped")


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


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def make_unreadable_by_exec(path: Path) -> None:
    path.chmod(path.stat().st_mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        return
