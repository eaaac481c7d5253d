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
from tests.support.waiting import wait_for

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
    plan = '#!/bin/sh\ncat >/dev/null\necho \'{"would_free": 4096, "files": ["a.log"]}\'\n'
    write_skill(
        root, "planned_clean", plan, preview={"args": {"dry_run": True}}, **{"class": "mutating"}
    )


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
    arrow = f"→ {served.url} (ONGRID_URL)"
    screen = in_terminal("run", "spaced", "--raw", env=served.environ("olga"))
    assert screen.status == 0, screen.text
    assert screen.raw == f"{arrow}\r\n{SPACED}\r\n"
    pretty = in_terminal("run", "spaced", env=served.environ("olga"))
    assert pretty.text == arrow + '\n{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}\n'


def test_run_on_a_server_in_a_pipe_writes_plain_progress_lines_and_the_bytes(
    served: Served, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    gate.touch()
    done = piped("run", "gated", f"gate={gate}", env=served.environ("olga"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"done": true, "n": [1, 2]}\n'
    assert done.stderr.decode().splitlines() == [
        f"→ {served.url} (ONGRID_URL)",
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


def view(screen_text: str) -> dict[str, str]:
    """The key/value lines of a record's view: key → the rest of its line."""
    pairs = (line.split(None, 1) for line in screen_text.splitlines() if line[:1].isalpha())
    return {pair[0]: pair[1].rstrip() if len(pair) > 1 else "" for pair in pairs}


def test_approve_and_reject_at_a_terminal_show_the_request_and_scripts_keep_the_json(
    served: Served,
) -> None:
    approved = served.execute("disk_clean", args={"path": "/var/tmp"})["approval_id"]
    screen = in_terminal(
        "approvals", "approve", approved[:8], "--comment", "ok", env=served.environ("admin")
    )
    assert screen.status == 0, screen.text
    shown = view(screen.text)
    assert shown["status"] == "approved" and shown["class"] == "mutating"
    assert shown["signatures"] == "1 of 1" and shown["requested_by"] == "olga"
    assert shown["signed"].startswith("approve by admin (admin) ") and shown["signed"].endswith(
        ": ok"
    )
    assert '"path": "/var/tmp"' in screen.text  # the args, pretty-printed
    assert COLOUR.search(screen.raw)  # the status and the class, as the lists colour them

    rejected = served.execute("disk_clean")["approval_id"]
    screen = in_terminal("approvals", "reject", rejected, env=served.environ("admin"))
    assert screen.status == 0, screen.text
    assert view(screen.text)["status"] == "rejected"
    as_json = in_terminal("approvals", "show", rejected, "--json", env=served.environ("admin"))
    body = json.loads(as_json.text.splitlines()[-1])
    assert (body["id"], body["status"]) == (rejected, "rejected")
    piped_show = piped("approvals", "show", rejected, env=served.environ("admin"))
    assert json.loads(piped_show.stdout)["status"] == "rejected"  # a script's bytes: the JSON
    assert piped_show.stdout.count(b"\n") == 1


def test_executions_show_at_a_terminal_shows_the_outcome_times_args_and_result(
    served: Served,
) -> None:
    execution = served.execute("spaced", wait=True)
    screen = in_terminal("executions", "show", execution["id"], env=served.environ("olga"))
    assert screen.status == 0, screen.text
    shown = view(screen.text)
    assert shown["status"] == "succeeded" and shown["skill"] == "spaced"
    assert {"created_at", "finished_at", "duration"} <= shown.keys()
    assert screen.text.endswith('result\n{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}\n')
    done = piped("executions", "show", execution["id"], "--json", env=served.environ("olga"))
    assert json.loads(done.stdout)["result"] == {"b": 1, "a": [1, 2]}


def test_approvals_show_at_a_terminal_shows_the_preview_and_what_it_said(served: Served) -> None:
    approval_id = served.execute("planned_clean")["approval_id"]

    def previewed() -> bool:
        body = served.http("GET", f"/v1/approvals/{approval_id}").json()
        return bool(body["preview"]["run"]["status"] == "done")

    wait_for(previewed, "the preview", 15)
    screen = in_terminal("approvals", "show", approval_id, env=served.environ("admin"))
    assert screen.status == 0, screen.text
    lines = [line.split() for line in screen.text.splitlines()]
    assert ["preview", "done", "in"] in [words[:3] for words in lines]  # the field
    assert ["preview"] in lines  # the block's title, then what it said
    assert '"would_free": 4096' in screen.text  # what the dry run said, pretty-printed
    assert '"a.log"' in screen.text
