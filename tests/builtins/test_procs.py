"""list_processes against the real /proc, finding a `sleep` child started by the test."""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.builtins.procs import list_processes
from tests.support.builtins import assert_schema

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

MARK = "4242.4242"  # an unusual sleep duration that identifies our child


def run(**args: Any) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(list_processes(BuiltinContext(), **args))
    return result


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", MARK])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_schema_has_optional_filters_and_bounded_limit() -> None:
    schema = assert_schema(list_processes, [], {"limit": (1, 5000)})
    assert schema["properties"]["sort_by"]["enum"] == ["rss", "cpu", "pid"]
    assert schema["properties"]["sort_by"]["default"] == "rss"
    assert schema["properties"]["limit"]["default"] == 200


def test_finds_a_child_sleep_by_name(sleeper: subprocess.Popen[bytes]) -> None:
    result = run(name_contains="sleep")
    mine = [p for p in result["processes"] if p["pid"] == sleeper.pid]
    assert len(mine) == 1, result
    proc = mine[0]
    assert proc["name"] == "sleep"
    assert proc["cmdline"] == f"sleep {MARK}"
    assert proc["ppid"] == os.getpid()
    assert proc["user"] == pwd.getpwuid(os.geteuid()).pw_name
    assert proc["uid"] == os.geteuid()
    assert proc["state"] in {"S", "R", "D"}
    assert proc["rss_bytes"] >= 0
    assert proc["cpu_seconds"] >= 0
    assert datetime.fromisoformat(proc["start_time"]).tzinfo is not None
    assert all(
        "sleep" in p["name"].lower() or "sleep" in p["cmdline"].lower() for p in result["processes"]
    )


def test_name_filter_matches_command_line_case_insensitively(
    sleeper: subprocess.Popen[bytes],
) -> None:
    result = run(name_contains=f"SLEEP {MARK}")
    assert [p["pid"] for p in result["processes"]] == [sleeper.pid]
    assert result["count"] == result["total"] == 1
    assert result["truncated"] is False


def test_user_filter_by_name_and_uid(sleeper: subprocess.Popen[bytes]) -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    by_name = run(name_contains=MARK, user=me)
    by_uid = run(name_contains=MARK, user=str(os.geteuid()))
    assert [p["pid"] for p in by_name["processes"]] == [sleeper.pid]
    assert [p["pid"] for p in by_uid["processes"]] == [sleeper.pid]
    assert run(name_contains=MARK, user="no-such-user-xyz")["processes"] == []


def test_sorting_and_limit() -> None:
    by_pid = run(sort_by="pid", limit=5000)["processes"]
    pids = [p["pid"] for p in by_pid]
    assert pids == sorted(pids)
    assert os.getpid() in pids
    by_rss = [p["rss_bytes"] for p in run(sort_by="rss")["processes"]]
    assert by_rss == sorted(by_rss, reverse=True)
    by_cpu = [p["cpu_seconds"] for p in run(sort_by="cpu")["processes"]]
    assert by_cpu == sorted(by_cpu, reverse=True)
    one = run(limit=1)
    assert one["count"] == 1
    assert one["total"] >= 2
    assert one["truncated"] is True


def test_cmdline_is_truncated() -> None:
    # GNU sleep adds up its arguments: many "0"s make a long command line, same duration.
    proc = subprocess.Popen(["sleep", MARK, *["0"] * 400])
    try:
        found = [p for p in run(name_contains=MARK)["processes"] if p["pid"] == proc.pid]
    finally:
        proc.kill()
        proc.wait(10)
    assert len(found) == 1
    assert len(found[0]["cmdline"]) == 512
    assert found[0]["cmdline"].startswith(f"sleep {MARK} 0 0 ")
    assert found[0]["cmdline"].endswith("…")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(BuiltinFailure):
        run(limit=0)
    with pytest.raises(BuiltinFailure):
        run(sort_by="name")
