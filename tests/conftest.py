"""Shared fixtures: real skill folders written into tmp_path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import MakeSkill, write_skill

# Tests count skills and loader lines exactly: the bundled catalogue stays out unless a test
# asks for it (bundled=True, or ONGRID_BUNDLED_SKILLS=1 in a child's environment).
os.environ.setdefault("ONGRID_BUNDLED_SKILLS", "0")


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
