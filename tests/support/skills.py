"""Real skill folders, SKILL.md files, executables and persona files written into a directory,
the registry built from them, and the `skills_root` / `make_skill` fixtures.

Everything lands on disk exactly as an operator would lay it out: nothing here builds a Skill or
a Persona object by hand.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ongrid_skills.skills.registry import Registry, build_registry

MakeSkill = Callable[..., Path]

#: The repository's example skills (examples/skills), validated and run as shipped.
EXAMPLE_SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"

#: A skill entry that reads its args and answers ``{"ok": true}``.
OK_SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n"


def make_executable(path: Path) -> Path:
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_skill(
    root: Path,
    name: str,
    script: str = OK_SCRIPT,
    *,
    folder: str | None = None,
    **manifest: Any,
) -> Path:
    """Write ``root/<folder>/skill.json`` and its ``run`` executable; return the folder."""
    path = root / (folder or name.replace("_", "-"))
    path.mkdir(parents=True, exist_ok=True)
    entry = path / "run"
    entry.write_text(script)
    make_executable(entry)
    body = {"name": name, "description": f"{name} test skill", "entry": "run", **manifest}
    (path / "skill.json").write_text(json.dumps(body))
    return path


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
    return make_executable(path)


def executable_dir(tmp_path: Path, *names: str) -> str:
    """A PATH value whose first directory holds executables with the given names."""
    folder = tmp_path / "bin"
    for name in names:
        write_exec(folder, name, "#!/bin/sh\nexit 0\n")
    return str(folder) + os.pathsep + os.environ.get("PATH", "")


def write_persona(
    folder: Path,
    name: str,
    mode: str = "read-only",
    body: str | None = None,
    **front: Any,
) -> Path:
    """Write ``folder/<name>.md``; ``front`` adds or overrides frontmatter keys (``tools``,
    ``disallowed_tools``, ``model``…); ``body`` is the prompt (``You are <name>.`` by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "name": name,
        "description": f"The {name} persona.",
        "when_to_use": "In tests.",
        "permission_mode": mode,
        **front,
    }
    path = folder / f"{name}.md"
    prompt = body if body is not None else f"You are {name}."
    path.write_text(f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n{prompt}\n")
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


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    """An empty external skills root, ``tmp_path/skills``."""
    root = tmp_path / "skills"
    root.mkdir()
    return root


@pytest.fixture
def make_skill(skills_root: Path) -> MakeSkill:
    """``make_skill(name, script=None, **manifest)`` writes a skill under ``skills_root``."""

    def make(name: str, script: str | None = None, **manifest: Any) -> Path:
        if script is None:
            return write_skill(skills_root, name, **manifest)
        return write_skill(skills_root, name, script, **manifest)

    return make
