"""The commands' event loop: uvloop by default, asyncio's own when told, a clear stop for a
setting that names no loop we can run."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import warnings
from pathlib import Path

import pytest

from ongrid_skills.doors.cli import eventloop
from tests.support.cli import run_cli
from tests.support.skills import MakeSkill


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_the_commands_run_on_uvloop_unless_told_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV_NAME, raising=False)
    assert eventloop.chosen() == "uvloop"
    assert eventloop.run_until_done(_loop_module()).startswith("uvloop")
    for value in ("uvloop", " UVLOOP ", "auto"):
        monkeypatch.setenv(eventloop.ENV_NAME, value)
        assert eventloop.chosen() == "uvloop"
    monkeypatch.setenv(eventloop.ENV_NAME, "asyncio")
    assert eventloop.chosen() == "asyncio"
    assert eventloop.run_until_done(_loop_module()).startswith("asyncio")


def test_a_setting_naming_no_known_loop_is_refused_and_the_coroutine_never_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(eventloop.ENV_NAME, "tokio")
    started: list[bool] = []

    async def main() -> None:
        started.append(True)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would fail the test
        with pytest.raises(eventloop.EventLoopSettingError, match="ONGRID_EVENT_LOOP='tokio'"):
            eventloop.run_until_done(main())
    assert started == []


def test_run_with_an_unknown_loop_setting_exits_with_the_reason_and_runs_nothing(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("marker", "#!/bin/sh\ncat >/dev/null\ntouch ran\necho '{}'\n")
    done: subprocess.CompletedProcess[str] = run_cli(
        "run",
        "marker",
        "{}",
        ONGRID_SKILLS_EXTERNAL_DIRS=str(skills_root),
        ONGRID_EVENT_LOOP="tokio",
    )
    assert done.returncode == 1
    assert "ONGRID_EVENT_LOOP='tokio' is not a known event loop" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (skills_root / "marker" / "ran").exists()
    on_asyncio = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root), "ONGRID_EVENT_LOOP": "asyncio"}
    ok = run_cli("run", "marker", "{}", **on_asyncio)
    assert ok.returncode == 0, ok.stderr
    assert (skills_root / "marker" / "ran").exists()


def test_serve_with_an_unknown_loop_setting_stops_before_binding_or_making_a_store(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with socket.socket() as probe:  # a free port, given back before serve is started
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run_cli(
        "serve", "--port", str(port), ONGRID_DATA_DIR=str(data), ONGRID_EVENT_LOOP="tokio"
    )
    assert done.returncode == 1
    assert "ONGRID_EVENT_LOOP='tokio' is not a known event loop" in done.stderr
    assert "serving on" not in done.stdout and "Traceback" not in done.stderr
    assert not data.exists()  # no store and no admin token were made
