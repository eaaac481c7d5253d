"""read_journal against a fake `journalctl` executable placed first on PATH."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.builtins.journal import read_journal
from ongrid_skills.execution.runner import SubprocessRunner
from tests.support.builtins import assert_schema
from tests.support.processes import alive
from tests.support.runner import script_skill
from tests.support.waiting import until, wait_for

Fake = Callable[[str], Path]

NGINX = {
    "__REALTIME_TIMESTAMP": "1714550400123456",
    "_SYSTEMD_UNIT": "nginx.service",
    "SYSLOG_IDENTIFIER": "nginx",
    "PRIORITY": "3",
    "MESSAGE": "upstream timed out",
    "_PID": "123",
    "_HOSTNAME": "web1",
}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fake:
    """``fake(body)`` installs ``tmp/bin/journalctl`` (a sh script that records its argv and env
    to ``tmp/argv`` and ``tmp/env``, then runs ``body``) first on PATH; returns tmp_path."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setenv("ONGRID_TEST_SECRET", "must-not-leak")

    def install(body: str) -> Path:
        script = bindir / "journalctl"
        script.write_text(
            "#!/bin/sh\n"
            f"printf '%s\\n' \"$@\" > '{tmp_path}/argv'\n"
            f"env > '{tmp_path}/env'\n"
            f"{body}\n"
        )
        script.chmod(0o755)
        return tmp_path

    return install


def emit(*records: Any) -> str:
    """A shell body printing one line per record (JSON for non-strings)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    data = "\n".join(lines) + "\n"
    return f"cat <<'EOF'\n{data}EOF"


def run(**args: Any) -> dict[str, Any]:
    lines: list[str] = []
    ctx = BuiltinContext(emit=lambda kind, data: lines.append(data.get("line", "")))
    result: dict[str, Any] = asyncio.run(read_journal(ctx, **args))
    result["_log"] = lines
    return result


def test_schema_bounds_lines_and_restricts_values() -> None:
    schema = assert_schema(read_journal, [], {"lines": (1, 10000), "timeout_ms": (100, 120000)})
    props = schema["properties"]
    assert props["lines"]["default"] == 100
    assert "pattern" in props["unit"]["anyOf"][0]
    assert "pattern" in props["since"]["anyOf"][0]
    assert props["priority"]["anyOf"][0]["enum"][0] == "emerg"


def test_entries_are_parsed_from_json_lines(fake: Fake) -> None:
    tmp = fake(emit(NGINX, {"__REALTIME_TIMESTAMP": "1714550401000000", "MESSAGE": "second"}))
    result = run()
    assert result["count"] == 2
    first, second = result["entries"]
    assert first == {
        "ts": "2024-05-01T08:00:00.123456+00:00",
        "unit": "nginx.service",
        "identifier": "nginx",
        "priority": 3,
        "priority_name": "err",
        "message": "upstream timed out",
        "pid": 123,
        "host": "web1",
    }
    assert second["message"] == "second"
    assert second["unit"] is None
    assert second["priority"] is None
    assert (tmp / "argv").read_text().splitlines() == [
        "--no-pager",
        "--output=json",
        "--lines=100",
    ]


def test_filters_are_passed_as_single_option_arguments(fake: Fake) -> None:
    tmp = fake(emit(NGINX))
    run(unit="nginx.service", since="1h ago", lines=5, priority="err")
    assert (tmp / "argv").read_text().splitlines() == [
        "--no-pager",
        "--output=json",
        "--lines=5",
        "--unit=nginx.service",
        "--since=1h ago",
        "--priority=err",
    ]


def test_child_gets_only_path(fake: Fake) -> None:
    tmp = fake(emit(NGINX))
    run()
    env = dict(line.split("=", 1) for line in (tmp / "env").read_text().splitlines() if "=" in line)
    assert env["PATH"] == os.environ["PATH"]
    assert "ONGRID_TEST_SECRET" not in env
    assert "HOME" not in env


def test_only_the_newest_lines_are_kept(fake: Fake) -> None:
    fake(emit(*({"MESSAGE": f"m{i}"} for i in range(10))))
    result = run(lines=3)
    assert [e["message"] for e in result["entries"]] == ["m7", "m8", "m9"]


def test_odd_records_are_decoded_or_skipped(fake: Fake) -> None:
    long_message = "x" * 5000
    fake(
        emit(
            {"MESSAGE": [104, 105, 255]},
            "not json at all",
            "[1, 2]",
            {"MESSAGE": None, "PRIORITY": "6"},
            {"MESSAGE": long_message},
            "",
        )
    )
    result = run()
    messages = [e["message"] for e in result["entries"]]
    assert messages[0] == "hi\ufffd"
    assert messages[1] == ""
    assert len(messages[2]) == 4096 and messages[2].endswith("…")
    assert result["skipped_lines"] == 2


def test_overlong_line_is_skipped_and_reading_goes_on(fake: Fake) -> None:
    fake(
        "head -c 5000000 /dev/zero | tr '\\0' 'a'\necho\n"
        + emit({"MESSAGE": "after the long line"})
    )
    result = run()
    assert [e["message"] for e in result["entries"]] == ["after the long line"]
    assert result["skipped_lines"] >= 1


def test_stderr_lines_go_to_the_log(fake: Fake) -> None:
    fake("echo 'Hint: You are currently not seeing messages from other users.' >&2\n" + emit(NGINX))
    result = run()
    assert result["count"] == 1
    assert any("not seeing messages" in line for line in result["_log"])


def test_failing_journalctl_is_a_failure_with_its_message(fake: Fake) -> None:
    fake("echo 'Failed to open journal: Permission denied' >&2\nexit 1")
    with pytest.raises(BuiltinFailure, match="status 1: Failed to open journal"):
        run()


def test_hanging_journalctl_is_killed_at_the_timeout(fake: Fake, tmp_path: Path) -> None:
    tmp = fake(f"sleep 60 &\necho $! > '{tmp_path}/grandchild'\nwait")
    started = time.monotonic()
    with pytest.raises(BuiltinFailure, match="did not finish within 300 ms"):
        run(timeout_ms=300)
    assert time.monotonic() - started < 5
    grandchild = int((tmp / "grandchild").read_text())
    wait_for(lambda: not alive(grandchild), "the process group to be killed", timeout=5)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_skill_call_ending_while_journalctl_runs_leaves_it_to_finish(
    fake: Fake, tmp_path: Path, loop: str
) -> None:
    # journalctl runs in a session of its own, like a skill's setsid daemon; the orphan sweep at
    # the end of a skill call must not kill and reap it (on uvloop its wait then never ended).
    go = tmp_path / "go"
    fake(f"while [ ! -e '{go}' ]; do sleep 0.01; done\n" + emit(NGINX))
    spec = script_skill(tmp_path / "skills", "#!/bin/sh\necho '{}'\n")
    runner = SubprocessRunner()

    async def scenario() -> dict[str, Any]:
        ctx = BuiltinContext(emit=lambda kind, data: None)
        reading = asyncio.ensure_future(read_journal(ctx, timeout_ms=20000))
        await until((tmp_path / "argv").exists, "journalctl to start")
        # It ends, and sweeps for orphans (what earlier tests left may be swept too).
        assert (await runner.run(spec, b"{}")).status == "succeeded"
        go.touch()
        return await asyncio.wait_for(reading, 15)

    result = uvloop.run(scenario()) if loop == "uvloop" else asyncio.run(scenario())
    assert [entry["message"] for entry in result["entries"]] == ["upstream timed out"]


@pytest.mark.parametrize(
    "args",
    [
        {"unit": "--help"},
        {"unit": "-u"},
        {"unit": "nginx service"},
        {"unit": "x;rm -rf /"},
        {"unit": ""},
        {"since": "-1h"},
        {"since": "--utc"},
        {"since": "$(id)"},
        {"since": "today\nnow"},
        {"priority": "loud"},
        {"lines": 0},
        {"lines": 10001},
    ],
)
def test_unsafe_or_invalid_values_are_refused_before_running(
    fake: Fake, args: dict[str, Any]
) -> None:
    tmp = fake(emit(NGINX))
    with pytest.raises(BuiltinFailure):
        run(**args)
    assert not (tmp / "argv").exists()


def test_unavailable_without_journalctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(BuiltinFailure, match="journalctl is not available"):
        run()
