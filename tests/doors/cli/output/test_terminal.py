"""rich is loaded only to draw on a terminal: `--version` and every command printing to a pipe
start without it (the start-up budget of SPEC §15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.skills import MakeSkill

PROBE = """
import json, sys
from ongrid_skills.doors.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("RICH=" + json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "rich")))
"""


def modules_of_rich(*args: str, env: dict[str, str]) -> list[str]:
    environ = {"PATH": os.environ["PATH"], "ONGRID_BUNDLED_SKILLS": "0", **env}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    loaded: list[str] = json.loads(done.stderr.rpartition("RICH=")[2])
    return loaded


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("--help",),
        ("-q", "list"),
        ("-q", "list", "-o", "yaml"),
        ("-q", "show", "counter"),
        ("-q", "run", "counter", '{"n": 1}'),
    ],
)
def test_a_command_printing_to_a_pipe_never_imports_rich(
    args: tuple[str, ...], make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("counter", "#!/bin/sh\ncat\n")
    assert modules_of_rich(*args, env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}) == []
