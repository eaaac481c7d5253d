"""What an operator sees at a terminal when the CLI talks to a server: `run --server` shows the
same live view as a local run (a progress bar with the skill's stderr lines above it, the result
pretty-printed, `--raw` for the verbatim bytes), and `approvals watch` colours its lines as the
lists do while a pipe keeps the plain ones. Against one real `serve`."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_skill
from tests.support.terminal import ANSI, COLOUR, finish, in_terminal, piped, spawn

GATED = """#!/bin/sh
args=$(cat)
gate=$(printf '%s' "$args" | sed -n 's/.*"gate": *"\\([^"]*\\)".*/\\1/p')
echo '{"progress": 1, "total": 2, "message": "half way"}' >&2
echo 'a plain line [bold]not markup[/bold]' >&2
i=0; while [ ! -e "$gate" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
echo '{"progress": 2, "total": 2, "message": "all done"}' >&2
echo '{"done": true, "n": [1, 2]}'
"""
#: The skill's stdout, spaced as no JSON serialiser would.
SPACED = '{"b": 1,   "a": [1, 2]}'
SCHEMA = {"type": "object", "properties": {"gate": {"type": "string"}}}


def write_skills(root: Path) -> None:
    write_skill(root, "gated", GATED, schema=SCHEMA)
    write_skill(root, "spaced", f"#!/bin/sh\ncat >/dev/null\necho '{SPACED}'\n")
    write_skill(root, "disk_clean", **{"class": "mutating"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    running = serve_for_cli(tmp_path_factory.mktemp("remote-views"), write_skills)
    try:
        yield running
    finally:
        stop(running.process)


def test_run_on_a_server_shows_a_live_bar_then_the_result_pretty(
    served: Served, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    child = spawn("run", "gated", f"gate={gate}", env=served.environ("olga"))
    # Both arrive while the skill still waits for the gate file: the bar is live.
    child.expect_exact("a plain line [bold]not markup[/bold]")
    child.expect(r"half way .*━.* 1/2")
    gate.touch()
    screen = finish(child)
    assert screen.status == 0, screen.text
    assert "all done" in screen.text and "2/2" in screen.text
    assert screen.text.endswith('{\n  "done": true,\n  "n": [\n    1,\n    2\n  ]\n}\n')
    assert COLOUR.search(screen.raw)


def test_run_on_a_server_with_raw_prints_the_skills_bytes_on_a_terminal(served: Served) -> None:
    screen = in_terminal("run", "spaced", "--raw", env=served.environ("olga"))
    assert screen.status == 0, screen.text
    assert screen.raw == SPACED + "\r\n"
    pretty = in_terminal("run", "spaced", env=served.environ("olga"))
    assert pretty.text == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}\n'


def test_run_on_a_server_in_a_pipe_writes_plain_progress_lines_and_the_bytes(
    served: Served, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    gate.touch()
    done = piped("run", "gated", f"gate={gate}", env=served.environ("olga"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"done": true, "n": [1, 2]}\n'
    assert done.stderr.decode().splitlines() == [
        "[progress 1/2] half way",
        "a plain line [bold]not markup[/bold]",
        "[progress 2/2] all done",
    ]


def test_approvals_watch_colours_its_lines_on_a_terminal(served: Served) -> None:
    pending = served.execute("disk_clean", args={"path": "/var/tmp"})["approval_id"]
    child = spawn("approvals", "watch", env=served.environ("vera"))
    child.expect(f"requested.*{pending}.*args=")  # pending now: printed before the stream is ready
    child.expect_exact("Ctrl-C to stop")
    child.kill(signal.SIGINT)
    screen = finish(child)
    assert screen.status == 0, screen.text
    [line] = [ln for ln in screen.text.splitlines() if pending in ln]
    expected = f"requested {pending}  disk_clean           mutating  0/1 by olga  args="
    assert line == expected + json.dumps({"path": "/var/tmp"})
    raw_line = next(ln for ln in screen.raw.splitlines() if pending in ln)
    assert COLOUR.search(raw_line)  # the event and the class badge
    assert ANSI.sub("", raw_line) == line


def test_approvals_watch_stays_plain_without_colour(served: Served) -> None:
    pending = served.execute("disk_clean")["approval_id"]
    env = {**served.environ("vera"), "NO_COLOR": "1"}
    child = spawn("approvals", "watch", env=env)
    child.expect(f"requested.*{pending}")
    child.expect_exact("Ctrl-C to stop")
    child.kill(signal.SIGINT)
    screen = finish(child)
    assert screen.status == 0
    assert not COLOUR.search(screen.raw)
