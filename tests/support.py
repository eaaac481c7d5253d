"""Test helpers: real skill folders written into a directory."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

MakeSkill = Callable[..., Path]


def write_skill(
    root: Path,
    name: str,
    script: str = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n",
    *,
    folder: str | None = None,
    **manifest: Any,
) -> Path:
    """Write ``root/<folder>/skill.json`` and its ``run`` executable; return the folder."""
    path = root / (folder or name.replace("_", "-"))
    path.mkdir(parents=True, exist_ok=True)
    entry = path / "run"
    entry.write_text(script)
    entry.chmod(entry.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    body = {"name": name, "description": f"{name} test skill", "entry": "run", **manifest}
    (path / "skill.json").write_text(json.dumps(body))
    return path


def venv_bin(name: str) -> str:
    """Path of a console script installed beside the running interpreter."""
    import sys

    return os.path.join(os.path.dirname(sys.executable), name)
