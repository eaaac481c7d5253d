"""What `run` shows: a live progress bar and streamed stderr lines on a terminal, the result
pretty-printed on a terminal and verbatim in a pipe or with --raw; plain lines in pipes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.skills import MakeSkill
from tests.support.terminal import ANSI, COLOUR, finish, in_terminal, piped, spawn

RESULT = '{"b": 1,   "a": [1, 2],  "s": "x"}'
ANSWER = f"#!/bin/sh\ncat >/dev/null\necho '{RESULT}'\n"


def gated(gate: Path) -> str:
    """A skill that reports progress 1/3 and a plain line, waits for ``gate``, then ends."""
    return (
        "#!/bin/sh\ncat >/dev/null\n"
        """echo '{"progress": 1, "total": 3, "message": "warming up"}' >&2\n"""
        "echo 'a plain line [bold]not markup[/bold]' >&2\n"
        f"i=0; while [ ! -e {gate} ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done\n"
        """echo '{"progress": 3, "total": 3, "message": "all done"}' >&2\n"""
        """echo '{"ok": true}'\n"""
    )


def test_a_result_is_pretty_printed_on_a_terminal(make_skill: MakeSkill, skills_root: Path) -> None:
    make_skill("answer", ANSWER)
    screen = in_terminal(
        "-q", "run", "answer", env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}
    )
    assert screen.status == 0, screen.text
    assert screen.text == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ],\n  "s": "x"\n}\n'
    assert COLOUR.search(screen.raw)  # keys and values highlighted


def test_raw_prints_the_skills_bytes_on_a_terminal(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("answer", ANSWER)
    env = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}
    screen = in_terminal("-q", "run", "answer", "--raw", env=env)
    assert screen.status == 0
    assert screen.raw == RESULT + "\r\n"


def test_in_a_pipe_the_result_is_the_skills_bytes_and_no_escape(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("answer", ANSWER)
    done = piped("-q", "run", "answer", env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)})
    assert done.returncode == 0
    assert done.stdout == RESULT.encode() + b"\n"
    assert b"\x1b" not in done.stdout + done.stderr


def test_a_result_that_would_read_differently_reprinted_is_shown_verbatim(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    """1e400 would come back as Infinity and a repeated key would lose a value: the terminal
    gets the skill's own bytes instead."""
    for name, body in [("huge", '{"n": 1e400}'), ("twice", '{"k": 1, "k": 2}')]:
        make_skill(name, f"#!/bin/sh\ncat >/dev/null\necho '{body}'\n")
        env = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}
        screen = in_terminal("-q", "run", name, env=env)
        assert screen.status == 0
        assert screen.text == body + "\n"


def test_progress_is_a_live_bar_with_stderr_lines_above_it(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    make_skill("stepper", gated(gate))
    child = spawn("-q", "run", "stepper", env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)})
    # Both arrive while the skill still waits for the gate file: the bar is live.
    child.expect_exact("a plain line [bold]not markup[/bold]")
    child.expect(r"warming up .*━.* 1/3")
    gate.touch()
    screen = finish(child)
    assert screen.status == 0, screen.text
    assert "all done" in screen.text
    assert "3/3" in screen.text
    assert screen.text.endswith('{\n  "ok": true\n}\n')
    assert "\x1b[?25l" in screen.raw  # the live display hid the cursor…
    assert screen.raw.count("\x1b[?25h") >= 1  # …and gave it back


def test_in_a_pipe_progress_and_stderr_stay_plain_lines(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    gate.touch()
    make_skill("stepper", gated(gate))
    done = piped("-q", "run", "stepper", env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)})
    assert done.returncode == 0
    assert done.stderr.decode().splitlines() == [
        "[progress 1/3] warming up",
        "a plain line [bold]not markup[/bold]",
        "[progress 3/3] all done",
    ]
    assert json.loads(done.stdout) == {"ok": True}


def test_escape_sequences_a_skill_writes_are_shown_not_obeyed_on_a_terminal(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    script = (
        "#!/bin/sh\ncat >/dev/null\n"
        "printf 'evil \\033[31mred\\033]0;owned\\007 end\\n' >&2\n"
        """printf '{"progress": 1, "message": "\\033[2Jclear"}\\n' >&2\n"""
        "echo '{}'\n"
    )
    make_skill("evil", script)
    screen = in_terminal("-q", "run", "evil", env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)})
    assert screen.status == 0
    assert "evil \\x1b[31mred\\x1b]0;owned\\x07 end" in screen.text
    assert "\\x1b[2Jclear" in screen.text
    assert "\x1b]0;owned" not in screen.raw
    assert "\x1b[2J" not in screen.raw


def test_no_color_on_a_terminal_keeps_the_bar_without_colour(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    gate.touch()
    make_skill("stepper", gated(gate))
    env = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root), "NO_COLOR": "1"}
    screen = in_terminal("-q", "run", "stepper", env=env)
    assert screen.status == 0
    assert "3/3" in screen.text and "━" in screen.text
    assert not COLOUR.search(screen.raw)
    assert screen.text.endswith('{\n  "ok": true\n}\n')


def test_a_failed_run_keeps_its_exit_code_and_says_why_on_a_terminal(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("failing", "#!/bin/sh\ncat >/dev/null\necho boom >&2\nexit 7\n")
    screen = in_terminal(
        "-q", "run", "failing", env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}
    )
    assert screen.status == 1
    assert "boom" in screen.text
    assert "failing failed (exit_status" in screen.text


def test_run_json_on_a_terminal_prints_the_execution_as_it_does_in_a_pipe(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("answer", ANSWER)
    env = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}
    screen = in_terminal("-q", "run", "answer", "--json", env=env)
    assert screen.status == 0
    [line] = screen.text.splitlines()
    assert json.loads(line)["result"] == json.loads(RESULT)
    assert not ANSI.search(screen.raw)
