"""The console script run as an operator runs it: a process of its own, in pipes, in a clean
environment (PATH and HOME, no bundled catalogue, no ONGRID_* variable but those given)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.processes import CLI


def cli_env(**env: str) -> dict[str, str]:
    """The environment of one run: the essentials plus ``env``."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "ONGRID_BUNDLED_SKILLS": "0",
        **env,
    }


def run_cli(
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    timeout: float = 60,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run ``ongrid-skills ARGS`` to the end; stdout and stderr captured apart."""
    return subprocess.run(
        [CLI, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=cli_env(**env),
        cwd=cwd,
        timeout=timeout,
    )
