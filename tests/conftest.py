"""Shared fixtures: real skill folders written into tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import MakeSkill, write_skill


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    root.mkdir()
    return root


@pytest.fixture
def make_skill(skills_root: Path) -> MakeSkill:
    def make(name: str, script: str | None = None, **manifest: Any) -> Path:
        if script is None:
            return write_skill(skills_root, name, **manifest)
        return write_skill(skills_root, name, script, **manifest)

    return make
