"""``validate`` lints persona files only where personas live: the persona dirs, a pack's
``agents/`` folder, or a file given by name. A skill's reference files, a CLAUDE.md or a README
with frontmatter are documentation: no finding, let alone a false error."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ongrid_skills.skills.lint import validate_paths
from tests.support.mcp import venv_bin
from tests.support.skills import write_skill_md

NOT_A_PERSONA = "---\ntitle: Reference\nsection: forms\n---\n# Forms\n"
BROKEN_PERSONA = "---\nname: Bad Name!\ndescription: d\n---\nYou are bad.\n"


def collection(root: Path) -> None:
    write_skill_md(root, "skills/pdf", {"name": "pdf", "description": "PDF forms."})
    (root / "skills" / "pdf" / "forms.md").write_text(NOT_A_PERSONA)
    (root / "skills" / "pdf" / "agents").mkdir()
    (root / "skills" / "pdf" / "agents" / "grader.md").write_text(NOT_A_PERSONA)
    (root / "CLAUDE.md").write_text("---\ndescription: project notes\n---\nUse pytest.\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text(NOT_A_PERSONA)


def test_documentation_with_frontmatter_beside_skills_is_not_linted_as_a_persona(
    tmp_path: Path,
) -> None:
    collection(tmp_path / "pack")
    assert validate_paths([str(tmp_path / "pack")]) == []


def test_a_packs_agents_folder_is_linted(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    collection(root)
    (root / "agents").mkdir()
    bad = root / "agents" / "reviewer.md"
    bad.write_text(BROKEN_PERSONA)
    (finding,) = validate_paths([str(root)])
    assert finding.path == str(bad)
    assert finding.severity == "error"
    assert finding.message.startswith("persona: ")


def test_persona_dirs_are_linted_and_so_is_a_file_given_by_name(tmp_path: Path) -> None:
    personas = tmp_path / "personas"
    personas.mkdir()
    bad = personas / "bad.md"
    bad.write_text(BROKEN_PERSONA)
    assert validate_paths([str(personas)]) == []  # not known as a persona dir: documentation
    (finding,) = validate_paths([str(personas)], persona_dirs=[str(personas)])
    assert finding.path == str(bad) and finding.severity == "error"
    (alone,) = validate_paths([str(bad)])
    assert alone.severity == "error"


def test_the_cli_lints_the_configured_persona_dirs(tmp_path: Path) -> None:
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "bad.md").write_text(BROKEN_PERSONA)
    env = {"PATH": os.environ["PATH"], "ONGRID_PERSONAS_DIRS": str(personas)}
    cli = venv_bin("ongrid-skills")
    configured = subprocess.run([cli, "validate"], capture_output=True, text=True, env=env)
    assert configured.returncode == 1
    assert f"{personas / 'bad.md'}:2:1: error: persona: " in configured.stdout
    given = subprocess.run(
        [cli, "validate", str(personas)], capture_output=True, text=True, env=env
    )
    assert given.returncode == 1  # the dir given is a configured persona dir
