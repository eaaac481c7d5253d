"""Which kind of pack a folder is: pack.json, a Claude Code plugin, a bare skills folder; the
pack's root inside an archive's top folder; synthesised ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ongrid_skills.errors import PackError
from ongrid_skills.packs.layout import Layout, detect, find_root
from ongrid_skills.packs.source import staged
from tests.support.packs import Entry, pack_entries, write_pack, zip_file
from tests.support.skills import write_skill_md


def plugin(root: Path, **manifest: object) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    write_skill_md(root / "skills", "tdd", {"name": "tdd", "description": "Test first."})
    return root


def test_a_folder_with_pack_json_is_a_pack_with_its_own_manifest(tmp_path: Path) -> None:
    found = detect(write_pack(tmp_path / "whatever", "ops", "2.1.0"))
    assert found.layout is Layout.PACK
    assert (found.manifest.id, found.manifest.version) == ("ops", "2.1.0")
    assert not found.manifest.synthesised


def test_a_claude_code_plugin_gets_an_id_from_its_name_and_keeps_its_version(
    tmp_path: Path,
) -> None:
    root = plugin(
        tmp_path / "x",
        name="Super Powers",
        version="3.1.0",
        description="Skills for coding.",
        repository="https://github.com/obra/superpowers",
    )
    found = detect(root)
    assert found.layout is Layout.PLUGIN
    assert found.manifest.to_dict() == {
        "id": "super-powers",
        "version": "3.1.0",
        "description": "Skills for coding.",
        "homepage": "https://github.com/obra/superpowers",
        "requires": None,
        "synthesised": True,
    }
    assert found.warnings == ()


def test_a_plugin_version_that_is_not_semver_becomes_0_0_0_with_a_warning(tmp_path: Path) -> None:
    found = detect(plugin(tmp_path / "x", name="p", version="2024.1"))
    assert found.manifest.version == "0.0.0"
    assert found.manifest.description == "Claude Code plugin p"
    (warning,) = found.warnings
    assert warning.format() == (
        ".claude-plugin/plugin.json:1:1: warning: version '2024.1' is not a semantic version: "
        "the pack is 0.0.0"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version": "1.0.0"}', "name is required"),
        ('{"name": "a", "name": "b"}', "duplicate key"),
        ("not json", "Expecting value"),
    ],
)
def test_a_plugin_manifest_that_names_nothing_or_does_not_parse_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    root = plugin(tmp_path / "x")
    (root / ".claude-plugin" / "plugin.json").write_text(text)
    with pytest.raises(PackError) as caught:
        detect(root)
    assert message in caught.value.problems[0].message


@pytest.mark.parametrize("skill_folder", [".", "skills/probe"])
def test_a_bare_skills_folder_gets_its_id_from_the_folder_name(
    tmp_path: Path, skill_folder: str
) -> None:
    root = tmp_path / "Ops_Runbooks"
    write_skill_md(root / skill_folder, ".", {"name": "probe", "description": "Probe it."})
    found = detect(root)
    assert found.layout is Layout.SKILLS
    assert (found.manifest.id, found.manifest.version) == ("ops-runbooks", "0.0.0")


def test_a_folder_that_is_none_of_the_three_is_no_pack(tmp_path: Path) -> None:
    (tmp_path / "x" / "deeper" / "skill").mkdir(parents=True)
    (tmp_path / "x" / "deeper" / "skill" / "SKILL.md").write_text("---\nname: a\n---\n")
    with pytest.raises(PackError, match=r"not a pack: no pack\.json"):
        detect(tmp_path / "x")


def test_the_root_is_an_archives_only_top_folder_unless_the_top_is_a_pack(tmp_path: Path) -> None:
    top = tmp_path / "unpacked"
    inner = write_pack(top / "ops-1.0.0")
    assert find_root(top) == inner
    (top / "stray.txt").write_text("x")
    assert find_root(top) == top  # two entries: no single top folder
    assert find_root(inner) == inner


def test_a_bare_skills_archive_is_named_after_its_top_folder_or_else_its_file(
    tmp_path: Path,
) -> None:
    skill = b"---\nname: probe\ndescription: Probe it.\n---\nBody\n"
    wrapped = zip_file(tmp_path / "anything.zip", [Entry("Net-Tools/SKILL.md", skill)])
    flat = zip_file(tmp_path / "Disk Tools.zip", [Entry("SKILL.md", skill)])
    with staged(wrapped) as pack:
        assert pack.manifest.id == "net-tools"
    with staged(flat) as pack:
        assert pack.manifest.id == "disk-tools"


def test_a_wrapped_pack_archive_keeps_its_manifest(tmp_path: Path) -> None:
    with staged(zip_file(tmp_path / "a.zip", pack_entries("demo-1.0.0/"))) as pack:
        assert pack.manifest.label == "demo@1.0.0"
        assert pack.root.name == "demo-1.0.0"
        assert [f.path for f in pack.files] == [
            "pack.json",
            "skills/alpha/run",
            "skills/alpha/skill.json",
        ]
