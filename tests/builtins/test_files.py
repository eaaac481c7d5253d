"""tail_file and disk_usage against real files, FIFOs and file systems under tmp_path.

Each test's tmp_path is configured as the readable root explicitly (the default is /var/log
only); the refusals themselves are tested in test_reach.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Reach
from ongrid_skills.builtins.files import disk_usage, tail_file
from tests.support.builtins import assert_schema

#: The reach of the running test: its tmp_path as the one readable root (see readable()).
CURRENT: dict[str, Reach] = {}


@pytest.fixture(autouse=True)
def readable(tmp_path: Path) -> None:
    CURRENT["reach"] = Reach(read_roots=(str(tmp_path),))


def tail(config: dict[str, str] | None = None, **args: Any) -> dict[str, Any]:
    ctx = BuiltinContext(config=config or {}, reach=CURRENT["reach"])
    result: dict[str, Any] = asyncio.run(tail_file(ctx, **args))
    return result


def usage(**args: Any) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(disk_usage(BuiltinContext(reach=CURRENT["reach"]), **args))
    return result


def test_tail_schema_requires_path_and_bounds_lines_and_bytes() -> None:
    schema = assert_schema(
        tail_file, ["path"], {"lines": (1, 10000), "max_bytes": (1, 16 * 1024 * 1024)}
    )
    assert schema["properties"]["lines"]["default"] == 100
    assert schema["properties"]["max_bytes"]["default"] == 1024 * 1024


def test_disk_usage_schema_defaults_to_root() -> None:
    schema = assert_schema(disk_usage, [], {})
    assert schema["properties"]["path"]["default"] == "/"


def test_last_lines_of_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "app.log"
    path.write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = tail(path=str(path), lines=3)
    assert result["lines"] == ["line 8", "line 9", "line 10"]
    assert result["truncated"] is True
    assert result["limited_by"] == "lines"
    assert result["size"] == path.stat().st_size
    assert result["path"] == str(path)


def test_whole_file_when_it_has_fewer_lines(tmp_path: Path) -> None:
    path = tmp_path / "short.log"
    path.write_text("a\nb\n")
    result = tail(path=str(path), lines=10)
    assert result["lines"] == ["a", "b"]
    assert result["truncated"] is False
    assert "limited_by" not in result


def test_exactly_the_asked_number_of_lines(tmp_path: Path) -> None:
    path = tmp_path / "exact.log"
    path.write_text("a\nb\nc\n")
    result = tail(path=str(path), lines=3)
    assert result["lines"] == ["a", "b", "c"]
    assert result["truncated"] is False


def test_last_line_without_newline_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "crlf.log"
    path.write_bytes(b"one\r\ntwo\r\nthree")
    assert tail(path=str(path), lines=2)["lines"] == ["two", "three"]


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.log"
    path.touch()
    result = tail(path=str(path))
    assert result["lines"] == []
    assert result["truncated"] is False
    assert result["size"] == 0


def test_big_file_reads_only_its_tail(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    line = b"%08d " + b"." * 90 + b"\n"
    with path.open("wb") as fh:
        for start in range(0, 200_000, 10_000):  # 200k lines, ~20 MB
            fh.write(b"".join(line % i for i in range(start, start + 10_000)))
    result = tail(path=str(path), lines=50)
    assert len(result["lines"]) == 50
    assert result["lines"][-1].startswith("00199999 ")
    assert result["lines"][0].startswith("00199950 ")
    assert result["size"] == path.stat().st_size > 19_000_000
    assert result["bytes_read"] <= 64 * 1024
    assert result["truncated"] is True


def test_lines_spanning_several_blocks(tmp_path: Path) -> None:
    path = tmp_path / "blocks.log"
    path.write_text("".join(f"{i:06d} {'y' * 200}\n" for i in range(5000)))  # ~1 MB
    result = tail(path=str(path), lines=2000)
    assert len(result["lines"]) == 2000
    assert result["lines"][0].startswith("003000 ")
    assert result["lines"][-1].startswith("004999 ")
    assert 2000 * 208 <= result["bytes_read"] < 2000 * 208 + 64 * 1024


def test_max_bytes_limits_the_read(tmp_path: Path) -> None:
    path = tmp_path / "limited.log"
    path.write_text("".join(f"{i:04d}\n" for i in range(1000)))  # 5 bytes a line
    result = tail(path=str(path), lines=1000, max_bytes=52)
    assert result["bytes_read"] == 52
    assert result["truncated"] is True
    assert result["limited_by"] == "max_bytes"
    # 52 bytes = the end of one line + 10 whole lines; the partial first one is dropped
    assert result["lines"] == [f"{i:04d}" for i in range(990, 1000)]


def test_single_line_longer_than_max_bytes_gives_its_end(tmp_path: Path) -> None:
    path = tmp_path / "oneline.log"
    path.write_text("a" * 5000 + "END\n")
    result = tail(path=str(path), lines=5, max_bytes=100)
    assert result["lines"] == ["a" * 96 + "END"]
    assert result["partial_first_line"] is True
    assert result["truncated"] is True


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "bin.log"
    path.write_bytes(b"ok\nbad \xff\xfe here\n")
    assert tail(path=str(path))["lines"] == ["ok", "bad \ufffd\ufffd here"]


def test_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link-to-pipe"
    link.symlink_to(fifo)
    started = time.monotonic()
    for path in (fifo, link):
        with pytest.raises(BuiltinFailure, match="FIFO"):
            tail(path=str(path))
    assert time.monotonic() - started < 5


def test_directory_socket_and_device_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BuiltinFailure, match="directory"):
        tail(path=str(tmp_path))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        with pytest.raises(BuiltinFailure, match="socket"):
            tail(path=str(tmp_path / "sock"))
    CURRENT["reach"] = Reach(read_roots=(str(tmp_path), "/dev"))  # an operator who allows /dev
    with pytest.raises(BuiltinFailure, match="character device"):
        tail(path="/dev/null")


@pytest.mark.parametrize("path", ["relative.log", "./x", "", "~/x", "/tmp/a\x00b"])
def test_relative_or_malformed_paths_are_refused(path: str) -> None:
    with pytest.raises(BuiltinFailure):
        tail(path=path)


def test_missing_file_fails(tmp_path: Path) -> None:
    with pytest.raises(BuiltinFailure, match="does not exist"):
        tail(path=str(tmp_path / "nope.log"))


def test_line_and_byte_bounds_are_enforced(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("x\n")
    bad: list[dict[str, Any]] = [{"lines": 0}, {"lines": 10001}, {"max_bytes": 0}]
    for args in bad:
        with pytest.raises(BuiltinFailure):
            tail(path=str(path), **args)


def test_allowed_dirs_confine_reads(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "logs", tmp_path / "secrets"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "app.log").write_text("fine\n")
    (outside / "key").write_text("secret\n")
    (allowed / "sneaky.log").symlink_to(outside / "key")
    config = {"files.allowed_dirs": f" {allowed} , /nonexistent-root"}
    assert tail(config, path=str(allowed / "app.log"))["lines"] == ["fine"]
    for path in (outside / "key", allowed / "sneaky.log", allowed / ".." / "secrets" / "key"):
        with pytest.raises(BuiltinFailure, match="outside the allowed"):
            tail(config, path=str(path))


def test_disk_usage_matches_statvfs(tmp_path: Path) -> None:
    result = usage(path=str(tmp_path))
    vfs = os.statvfs(tmp_path)
    assert result["path"] == str(tmp_path)
    assert result["total_bytes"] == vfs.f_blocks * vfs.f_frsize
    assert result["used_bytes"] + result["free_bytes"] == result["total_bytes"]
    assert 0 <= result["available_bytes"] <= result["free_bytes"]
    assert 0 <= result["used_percent"] <= 100
    assert result["inodes_total"] == vfs.f_files
    assert 0 <= result["inodes_free"] <= result["inodes_total"]
    assert os.path.ismount(result["mount_point"])
    assert str(tmp_path.resolve()).startswith(result["mount_point"])
    assert isinstance(result["read_only"], bool)


def test_disk_usage_of_root_by_default() -> None:
    assert usage()["path"] == "/"


def test_disk_usage_refuses_relative_and_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(BuiltinFailure, match="absolute"):
        usage(path="tmp")
    with pytest.raises(BuiltinFailure, match="does not exist"):
        usage(path=str(tmp_path / "missing"))
