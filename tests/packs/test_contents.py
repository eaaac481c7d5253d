"""What a pack holds, through the same loader and lint as every skill: names, and every problem
with its path inside the pack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ongrid_skills.errors import PackError
from ongrid_skills.packs.contents import inspect_pack
from ongrid_skills.packs.layout import detect
from tests.support.packs import write_pack
from tests.support.skills import write_persona, write_skill, write_skill_md


def test_a_pack_holds_its_skill_json_skills_skill_md_skills_and_personas(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p", skills=["alpha", "beta"], native=["triage"], personas=["oncall"]
    )
    contents = inspect_pack(detect(root))
    assert contents.ok, contents.problems
    assert contents.skill_names() == ["alpha", "beta", "triage"]
    assert contents.persona_names() == ["oncall"]
    assert any('registered subprocess skill "alpha"' in line for line in contents.loader_lines)
    assert contents.summary()["problems"] == []


def test_every_broken_file_is_an_error_with_its_path_inside_the_pack(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", skills=["alpha"])
    bad = write_skill(root / "skills", "broken")
    (bad / "skill.json").write_text('{\n  "name": "broken",\n  "entry": "run"\n}\n')
    (root / "skills" / "alpha" / "run").chmod(0o644)  # no longer executable
    write_skill_md(root / "skills", "nameless", {"description": "no name"})
    contents = inspect_pack(detect(root))
    assert [p.format() for p in contents.errors] == [
        ".:1:1: error: the pack holds no skill and no persona",
        "skills/alpha/skill.json:1:54: error: entry skills/alpha/run is not executable",
        "skills/broken/skill.json:1:1: error: description is required",
        "skills/nameless/SKILL.md:1:1: error: name is required (a string)",
    ]
    with pytest.raises(PackError) as caught:
        contents.raise_for_errors("demo@1.0.0")
    assert len(caught.value.problems) == 4
    assert str(caught.value).startswith("pack demo@1.0.0 is not valid: .:1:1: error: the pack")


def test_two_skills_of_one_pack_with_the_same_name_are_an_error(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", skills=["alpha"])
    write_skill(root / "more", "alpha")
    (error,) = inspect_pack(detect(root)).errors
    assert error.path == "skills/alpha/skill.json"
    assert error.message == (
        'name "alpha" is already used by more/alpha/skill.json; two skills of a pack share it'
    )


def test_a_pack_with_nothing_in_it_is_an_error(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", skills=[])
    (error,) = inspect_pack(detect(root)).errors
    assert error.format() == ".:1:1: error: the pack holds no skill and no persona"


def test_a_pack_of_personas_only_is_a_pack(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", skills=[], personas=["oncall", "auditor"])
    assert inspect_pack(detect(root)).persona_names() == ["auditor", "oncall"]


def test_a_bad_persona_is_an_error_in_a_pack(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", personas=["oncall"])
    write_persona(root / "agents", "broken", mode="root")
    (error,) = inspect_pack(detect(root)).errors
    assert error.path == "agents/broken.md"
    assert "permission_mode must be one of" in error.message


def test_a_claude_code_agent_in_a_plugin_is_a_warning_not_a_persona(tmp_path: Path) -> None:
    root = tmp_path / "plugin"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "rev"}))
    write_skill_md(root / "skills", "review", {"name": "review", "description": "Review."})
    (root / "agents").mkdir()
    (root / "agents" / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\n---\nYou review.\n"
    )
    contents = inspect_pack(detect(root))
    assert contents.ok
    assert contents.persona_names() == []
    (warning,) = [w for w in contents.warnings if w.path == "agents/reviewer.md"]
    assert warning.message.endswith("(a Claude Code agent, not loaded as a persona)")


def test_a_requires_range_this_version_does_not_meet_is_an_error(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", requires=">=99")
    (error,) = inspect_pack(detect(root), ongrid_version="0.1.0").errors
    assert error.format() == (
        "pack.json:1:1: error: the pack requires ongrid-skills >=99; this is 0.1.0"
    )
    assert inspect_pack(detect(root), ongrid_version="99.0").ok


def test_warnings_do_not_refuse_a_pack(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", extra_field=1)
    write_skill(root / "skills", "gamma", timeout=5)  # a typo'd field: a lint warning
    contents = inspect_pack(detect(root))
    assert contents.ok
    assert {w.path for w in contents.warnings} == {"pack.json", "skills/gamma/skill.json"}
