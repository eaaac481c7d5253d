"""What a command imports: the commands a person types most never load the server stack.

Each command runs in a real process started exactly as the console script starts it (the
``ongrid-skills`` entry point of this install), under a tiny wrapper that writes the names in
``sys.modules`` to a file when the process exits. Timing is bench/bench_cli_start.py's job; this
only checks what was imported, which does not depend on the machine's load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_skills.store import open_store
from tests.support.skills import EXAMPLE_SKILLS

#: The server stack: a local command has no use for any of it.
SERVER_STACK = ("fastapi", "sqlalchemy", "alembic", "uvicorn", "nats")

#: Runs the console script's entry point and dumps sys.modules at exit (SystemExit included).
WRAPPER = """
import atexit, json, os, sys
from importlib.metadata import entry_points

def _dump():
    with open(os.environ["MODULES_OUT"], "w") as fh:
        json.dump(sorted(sys.modules), fh)

atexit.register(_dump)
sys.argv[0] = "ongrid-skills"
(main,) = [ep.load() for ep in entry_points(group="console_scripts", name="ongrid-skills")]
sys.exit(main())
"""


def imported_by(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> set[str]:
    """The top-level packages of every module loaded by ``ongrid-skills ARGS``."""
    out = tmp_path / "modules.json"
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(EXAMPLE_SKILLS),
        "ONGRID_BUNDLED_SKILLS": "1",  # as an operator has it: the built-ins load too
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "MODULES_OUT": str(out),
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return {name.partition(".")[0] for name in json.loads(out.read_text())}


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("--help",),
        ("list",),
        ("list", "--json"),
        ("show", "host_info"),
        ("validate", str(EXAMPLE_SKILLS)),
        ("run", "host_info", "{}"),
    ],
    ids=lambda args: " ".join(args[:2]) if args[0] != "validate" else "validate",
)
def test_local_commands_do_not_import_the_server_stack(tmp_path: Path, args: tuple[str]) -> None:
    loaded = imported_by(tmp_path, *args)
    assert "ongrid_skills" in loaded, "the wrapper did not run the CLI"
    assert not loaded & set(SERVER_STACK), f"{' '.join(args)} imported {loaded & set(SERVER_STACK)}"


def test_the_probe_sees_the_store_when_a_command_opens_one(tmp_path: Path) -> None:
    # The control: a command that reads the data dir's store does load SQLAlchemy, so an empty
    # answer above means "not imported", not "the probe saw nothing".
    data_dir = tmp_path / "data"
    open_store(str(data_dir)).close()
    loaded = imported_by(tmp_path, "token", "list", env={"ONGRID_DATA_DIR": str(data_dir)})
    assert "sqlalchemy" in loaded
