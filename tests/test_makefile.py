"""The Makefile's two jobs on a fresh machine: ``make run`` builds a virtualenv with what running
needs and nothing else, and says nothing alarming while it does; ``make test`` adds the test
tools. Read from ``make -n`` (what make would run, nothing run), the steps that need no network
run for real."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def recipe(*targets: str) -> list[str]:
    """The commands ``make`` would run for ``targets`` from scratch (``-B``: whatever exists)."""
    done = subprocess.run(
        ["make", "-n", "-B", *targets],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": os.environ["PATH"]},
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def installs(lines: list[str]) -> list[str]:
    """What each ``pip install`` line installs (its last word, quotes removed)."""
    return [shlex.split(line)[-1] for line in lines if " pip install " in line]


def test_make_run_installs_the_package_without_the_test_extras() -> None:
    run = recipe("run")
    assert installs(run)[-1] == "."  # the package alone
    assert not any("[test]" in line for line in run), run
    assert "serve --watch" in run[-1]


def test_make_test_installs_the_test_extras() -> None:
    assert installs(recipe("test"))[-1] == ".[test]"


def test_building_the_spawn_helper_prints_no_warning() -> None:
    [step] = [line for line in recipe("run") if "spawner" in line]
    done = subprocess.run(step, shell=True, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    assert done.stdout.startswith("spawn helper "), done.stdout
