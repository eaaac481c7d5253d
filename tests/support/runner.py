"""The subprocess runner under test: real executables (scripts, compiled C programs) written into
tmp_path, the SpawnSpec the pipeline would build for them, and one call run to its outcome with
every event it emitted.
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

import pytest

from ongrid_skills.execution.records import Event
from ongrid_skills.execution.runner import RunOutcome, SpawnSpec, SubprocessRunner
from ongrid_skills.execution.spawner import HelperSpawner, spawner
from tests.support.processes import pid_gone, read_pid
from tests.support.waiting import wait_for

#: An interpreter usable from a shebang without any environment (the child gets none).
PYTHON = os.path.realpath(sys.executable)


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


def require_helper() -> None:
    """Skip unless the spawn helper can be used here; on Linux with a C compiler it must build
    and load, so that a broken ``spawn_helper.c`` fails the tests instead of skipping them."""
    try:
        found = spawner("helper")
    except RuntimeError as exc:
        if sys.platform.startswith("linux") and shutil.which("cc"):
            raise
        pytest.skip(str(exc))
    assert isinstance(found, HelperSpawner)


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


def read_int_file(path: Path, timeout: float = 5.0) -> int:
    """Wait until ``path`` holds a complete line with an integer (a pid), and return it."""
    return wait_for(lambda: read_pid(path), f"an integer in {path}", timeout)


def assert_gone(*pids: int, timeout: float = 3.0) -> None:
    wait_for(lambda: all(pid_gone(p) for p in pids), f"pids {pids} to be reaped", timeout)


def make_unreadable_by_exec(path: Path) -> None:
    path.chmod(path.stat().st_mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
