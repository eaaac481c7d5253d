"""A fresh clone to run documentation snippets in, and a shell that runs them one line at a time.

The clone holds what a user's checkout has and the snippets touch: ``examples/`` (copied, so a
snippet may write beside it) and ``.venv`` (a link to this test run's virtualenv, so
``.venv/bin/ongrid-skills`` is the product under test). Each line runs in its own ``bash`` with
the variables the earlier lines exported (``export -p`` is carried over in a file), in the clone,
with no ONGRID_* variable but those the snippets set. Output goes to files, not pipes: a line that
starts a background process (``sleep 600 &``) must not keep the test waiting for its pipe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.docs.doc_commands import REPO


def make_clone(where: Path) -> Path:
    """``where/clone`` with examples/ copied and .venv linked to this interpreter's venv."""
    clone = where / "clone"
    clone.mkdir()
    shutil.copytree(REPO / "examples", clone / "examples")
    os.symlink(Path(sys.executable).parent.parent, clone / ".venv")
    return clone


@dataclass(frozen=True)
class Ran:
    line: str
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"$ {self.line}\n(exit {self.code})\n--- stdout\n{self.out}--- stderr\n{self.err}"


class Shell:
    """Lines run one by one in ``cwd``; exported variables persist from one line to the next."""

    def __init__(self, cwd: Path, state_dir: Path, env: dict[str, str] | None = None) -> None:
        self.cwd = cwd
        self.state = state_dir / "exported.sh"
        self.out = state_dir / "out"
        self.err = state_dir / "err"
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(state_dir),
            "LANG": "C.UTF-8",
            **(env or {}),
        }
        self.state.write_text("")

    def run(self, line: str, timeout: float = 60) -> Ran:
        script = f'. "{self.state}"\n{line}\nrc=$?\nexport -p > "{self.state}"\nexit $rc\n'
        with self.out.open("w") as out, self.err.open("w") as err:
            done = subprocess.run(
                ["bash", "-c", script],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=self.cwd,
                env=self.env,
                timeout=timeout,
            )
        return Ran(line, done.returncode, self.out.read_text(), self.err.read_text())

    def variable(self, name: str) -> str:
        """An exported variable's value, as the next line would see it."""
        return self.run(f'printf %s "${name}"').out
