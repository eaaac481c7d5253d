"""Native skills (SKILL.md), what the LLM sees, search and in-process built-ins.

Shared helpers: real SKILL.md folders, executables and persona files written into tmp_path.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ongrid_skills.skills.registry import Registry, build_registry

T = TypeVar("T")

OK_SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n"


def write_skill_md(
    root: Path, folder: str, front: Mapping[str, Any] | str, body: str = "# Body\n"
) -> Path:
    """Write ``root/folder/SKILL.md``; ``front`` is a mapping (dumped as YAML) or raw YAML text."""
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    text = front if isinstance(front, str) else yaml.safe_dump(dict(front), sort_keys=False)
    skill_md = path / "SKILL.md"
    skill_md.write_text(f"---\n{text}---\n{body}")
    return skill_md


def write_exec(folder: Path, relative: str, script: str = OK_SCRIPT) -> Path:
    """Write an executable script at ``folder/relative``."""
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_persona(
    folder: Path,
    name: str,
    mode: str = "read-only",
    *,
    tools: list[str] | None = None,
    disallowed: list[str] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    front: dict[str, Any] = {
        "name": name,
        "description": f"The {name} persona.",
        "when_to_use": "In tests.",
        "permission_mode": mode,
    }
    if tools is not None:
        front["tools"] = tools
    if disallowed is not None:
        front["disallowed_tools"] = disallowed
    path = folder / f"{name}.md"
    path.write_text(f"---\n{yaml.safe_dump(front, sort_keys=False)}---\nYou are {name}.\n")
    return path


def load(
    native: Iterable[Path] = (),
    external: Iterable[Path] = (),
    personas: Iterable[Path] = (),
    *,
    bundled: bool = False,
    config: Mapping[str, str] | None = None,
) -> tuple[Registry, list[str]]:
    """Build a registry from real folders; return it with the loader lines it printed."""
    lines: list[str] = []
    registry = build_registry(
        [str(p) for p in external],
        [str(p) for p in personas],
        native_dirs=[str(p) for p in native],
        bundled=bundled,
        config=config,
        sink=lines.append,
    )
    return registry, lines


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def executable_dir(tmp_path: Path, *names: str) -> str:
    """A directory holding executables with the given names, for PATH-based requirements."""
    folder = tmp_path / "bin"
    for name in names:
        write_exec(folder, name, "#!/bin/sh\nexit 0\n")
    return str(folder) + os.pathsep + os.environ.get("PATH", "")
