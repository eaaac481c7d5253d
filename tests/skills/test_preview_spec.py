"""A skill's ``preview`` (SPEC §20) as the loaders read it: skill.json and SKILL.md ``exec:``
tools, validated strictly, its entry contained like the skill's, part of the definition hash."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.preview_spec import DEFAULT_PREVIEW_TIMEOUT
from ongrid_skills.skills.skill_json import Location, build_skill
from tests.support.skills import OK_SCRIPT, load, write_exec, write_skill, write_skill_md


def built(folder: Path, root: Path, **manifest: Any) -> Any:
    """The skill.json of ``folder`` built as the loader builds it."""
    body = {"name": "clean", "description": "Cleans.", "entry": "run", **manifest}
    loc = Location(str(folder / "skill.json"), str(folder), str(root), str(root))
    return build_skill(body, loc)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    return write_skill(root, "clean", **{"class": "mutating", "timeout_seconds": 60})


def test_preview_args_are_merged_over_the_callers_args(folder: Path) -> None:
    skill = built(folder, folder.parent, preview={"args": {"dry_run": True}})
    assert skill.preview is not None
    assert skill.preview.merged({"path": "/x", "dry_run": False}) == {"path": "/x", "dry_run": True}
    assert skill.preview.timeout_seconds == DEFAULT_PREVIEW_TIMEOUT


def test_a_preview_entry_of_the_same_folder_is_loaded_with_its_own_timeout(folder: Path) -> None:
    plan = write_exec(folder, "plan.sh")
    skill = built(folder, folder.parent, preview={"entry": "plan.sh", "timeout_seconds": 3})
    assert skill.preview.target.entry == str(plan)
    assert skill.preview.timeout_seconds == 3
    assert skill.preview.args is None


def test_the_default_preview_timeout_never_exceeds_the_skills_own(folder: Path) -> None:
    skill = built(folder, folder.parent, timeout_seconds=4, preview={"args": {"a": 1}})
    assert skill.preview.timeout_seconds == 4


@pytest.mark.parametrize(
    ("preview", "said"),
    [
        ("dry_run", "preview must be an object"),
        ({}, "exactly one of args and entry"),
        ({"args": {"a": 1}, "entry": "run"}, "exactly one of args and entry"),
        ({"args": {"a": 1}, "timeout": 5}, "preview.timeout is not a preview field"),
        ({"args": {}}, "preview.args must be a non-empty object"),
        ({"args": [1]}, "preview.args must be a non-empty object"),
        ({"args": {"a": 1}, "timeout_seconds": -1}, "must be a positive integer"),
        ({"args": {"a": 1}, "timeout_seconds": "5"}, "must be a positive integer"),
        ({"args": {"a": 1}, "timeout_seconds": 61}, "above the skill's timeout_seconds 60"),
        ({"entry": ""}, "preview.entry must be a non-empty path"),
        ({"entry": "missing.sh"}, "does not exist"),
    ],
)
def test_a_bad_preview_is_a_build_error_naming_the_field(
    folder: Path, preview: Any, said: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        built(folder, folder.parent, timeout_seconds=60, preview=preview)
    assert caught.value.field == "preview"
    assert caught.value.kind == "build"
    assert said in caught.value.message


def test_a_preview_entry_escaping_the_skills_folder_is_refused_at_load(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_exec(root / "other", "plan.sh")  # under the root, but another skill's folder
    folder = write_skill(root, "clean", preview={"entry": "../other/plan.sh"})
    linked = write_skill(root, "linked", preview={"entry": "plan.sh"})
    os.symlink(root / "other" / "plan.sh", linked / "plan.sh")  # a link out of the folder
    write_exec(tmp_path, "outside.sh")
    absolute = write_skill(root, "absolute", preview={"entry": str(tmp_path / "outside.sh")})

    registry, lines = load(external=[root])

    assert not {"clean", "linked", "absolute"} & set(registry.skills)
    said = "\n".join(lines)
    assert f"entry {root / 'other' / 'plan.sh'} escapes skill folder {folder}" in said
    assert f"escapes skill folder {linked}" in said
    assert f"entry {tmp_path / 'outside.sh'} escapes allowlist root {root}" in said
    assert str(absolute) in said


def test_the_preview_is_part_of_the_definition_hash(folder: Path) -> None:
    plan = write_exec(folder, "plan.sh")
    without = built(folder, folder.parent).definition_hash
    dry = built(folder, folder.parent, preview={"args": {"dry_run": True}}).definition_hash
    other = built(folder, folder.parent, preview={"args": {"dry_run": 1}}).definition_hash
    planned = built(folder, folder.parent, preview={"entry": "plan.sh"})
    assert len({without, dry, other, planned.definition_hash}) == 4

    before = planned.definition_hash
    plan.write_text(OK_SCRIPT.replace("true", "false"))  # the preview entry edited in place
    assert planned.definition_hash != before


def test_a_skill_md_exec_tool_declares_a_preview_and_a_builtin_tool_cannot(
    tmp_path: Path,
) -> None:
    native = tmp_path / "native"
    tools = [
        {
            "name": "rotate",
            "impl": "exec:run.sh",
            "class": "mutating",
            "preview": {"entry": "plan.sh"},
        },
        {"name": "rotate_dry", "impl": "exec:run.sh", "preview": {"args": {"dry_run": True}}},
    ]
    write_skill_md(native, "rotate", {"name": "rotate", "description": "Rotates.", "tools": tools})
    write_exec(native / "rotate", "run.sh")
    write_exec(native / "rotate", "plan.sh")
    bad = [{"name": "nope", "impl": "builtin:net.probe_tcp", "preview": {"args": {"a": 1}}}]
    write_skill_md(native, "nope", {"name": "nope", "description": "No.", "tools": bad})
    escaping = [{"name": "esc", "impl": "exec:run.sh", "preview": {"entry": "../rotate/plan.sh"}}]
    write_skill_md(native, "esc", {"name": "esc", "description": "Esc.", "tools": escaping})
    write_exec(native / "esc", "run.sh")

    registry, lines = load(native=[native])

    rotate = registry.skills["rotate"]
    assert rotate.preview is not None
    assert rotate.preview.target.entry == str(native / "rotate" / "plan.sh")
    assert registry.skills["rotate_dry"].preview.args == {"dry_run": True}
    said = "\n".join(lines)
    assert "nope" not in registry.skills and "tools[0].preview needs an exec: tool" in said
    assert "esc" not in registry.skills and "tools[0].preview.entry" in said
    assert f"escapes skill folder {native / 'esc'}" in said
