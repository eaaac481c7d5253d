"""The stdio streams of ``ongrid-skills mcp``: asyncio pipes, the standard descriptors diverted
while serving, hostile lines, and the fallback when stdin is a file."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ongrid_skills.doors.mcp.stdio import LineReader
from tests.support.cli import cli_env
from tests.support.mcp import RAW_INITIALIZE
from tests.support.processes import CLI

# Serves stdio_streams: echoes each line upper-cased; meanwhile something prints straight to
# fd 1 (as a careless library would). After the streams close, it writes to fd 1 again.
ECHO = textwrap.dedent(
    """
    import asyncio, os, sys
    from ongrid_skills.doors.mcp.stdio import stdio_streams

    async def main():
        async with stdio_streams() as streams:
            if streams is None:
                os.write(2, b"fallback\\n")
                return
            lines, out = streams
            async for line in lines:
                os.write(1, b"stray output\\n")
                await out.write(line.upper())
                await out.flush()
        os.write(1, b"after: blocking=%d\\n" % os.get_blocking(1))

    asyncio.run(main())
    """
)


def run_echo(stdin: bytes | Path, before: str = "") -> subprocess.CompletedProcess[bytes]:
    """ECHO in a child, with ``before`` run first (a line of Python)."""
    command = [sys.executable, "-c", before + "\n" + ECHO]
    if isinstance(stdin, Path):
        with stdin.open("rb") as fh:
            return subprocess.run(command, stdin=fh, capture_output=True, timeout=30)
    return subprocess.run(command, input=stdin, capture_output=True, timeout=30)


def test_on_uvloop_too_the_wire_works_and_the_descriptors_come_back_blocking() -> None:
    # uvloop's transports close the descriptor they are given: each gets its own copy.
    done = run_echo(
        b"one\n", "import asyncio, uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"ONE\nafter: blocking=1\n"


def test_lines_go_through_the_wire_and_stray_output_goes_to_stderr(tmp_path: Path) -> None:
    done = run_echo(b"one\ntwo\nlast without newline")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"ONE\nTWO\nLAST WITHOUT NEWLINEafter: blocking=1\n"
    assert done.stderr.count(b"stray output\n") == 3


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    done = run_echo(b"caf\xc3\xa9 \xff\xfe\nnext\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("CAFÉ \ufffd\ufffd\nNEXT\n".encode())


def test_a_file_redirected_into_stdin_falls_back_to_the_sdk_streams(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b"one\n")
    done = run_echo(requests)
    assert done.returncode == 0, done.stderr
    assert b"fallback" in done.stderr


def test_a_device_the_event_loop_cannot_watch_falls_back_to_the_sdk_streams() -> None:
    """/dev/null is a character device epoll refuses (EPERM): served on asyncio's pipes, the
    reader would never fire and the server would wait forever instead of seeing end of input."""
    done = run_echo(Path("/dev/null"))
    assert done.returncode == 0, done.stderr
    assert b"fallback" in done.stderr


def test_a_client_that_stops_reading_ends_the_streams_with_its_broken_pipe() -> None:
    """The answer meets a closed pipe: the write fails with the connection's error, and the
    streams close without a second error of their own hiding it."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    os.close(stdout_r)  # the client went away: nobody reads the answers
    os.write(stdin_w, b"one\n")
    os.close(stdin_w)
    try:
        done = subprocess.run(
            [sys.executable, "-c", ECHO],
            stdin=stdin_r,
            stdout=stdout_w,
            stderr=subprocess.PIPE,
            timeout=30,
        )
    finally:
        os.close(stdin_r)
        os.close(stdout_w)
    assert done.returncode == 1
    assert b"ConnectionResetError" in done.stderr or b"BrokenPipeError" in done.stderr
    assert b"AttributeError" not in done.stderr, done.stderr.decode()


def test_an_overlong_line_is_dropped_whole_and_the_next_one_is_read() -> None:
    async def scenario() -> list[str]:
        reader = asyncio.StreamReader(limit=64)
        reader.feed_data(b"x" * 1000 + b"\n" + b"y" * 200)
        reader.feed_data(b"z" * 50 + b"\nafter\n")
        reader.feed_eof()
        return [line async for line in LineReader(reader)]

    assert asyncio.run(scenario()) == ["", "", "after\n"]


def test_the_server_answers_a_request_after_garbage_lines(tmp_path: Path) -> None:
    """Over the real ``ongrid-skills mcp``: lines that are not JSON-RPC (not UTF-8, not JSON,
    empty) are reported and skipped; the initialize request after them is answered."""
    wire = b"\xff\xfe\x00garbage\n{not json\n\n" + json.dumps(RAW_INITIALIZE).encode() + b"\n"
    env = cli_env(ONGRID_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [CLI, "-q", "mcp"], input=wire, capture_output=True, timeout=60, env=env, cwd=tmp_path
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("id") for a in answers if "result" in a] == [1], done.stderr
    assert answers[-1]["result"]["serverInfo"]["name"] == "ongrid-skills"
