"""SKILL.md as the ecosystem writes it: openclaw requirements, the tolerant line reader, tools in
other formats, ``skill.md`` in lower case, names as written and ``pack:name``, collisions after
normalisation, and the declared fields shown by ``show``, ``list --json`` and REST."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.errors import UnknownSkill
from ongrid_skills.settings import ConfigView
from ongrid_skills.toolspec import instructions
from tests.support.agent import make_settings
from tests.support.mcp import venv_bin
from tests.support.server import running_app
from tests.support.skills import executable_dir, load, write_skill_md


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "native"
    folder.mkdir()
    return folder


def openclaw(name: str, block: dict[str, Any], key: str = "openclaw") -> dict[str, Any]:
    return {"name": name, "description": f"The {name} skill.", "metadata": {key: block}}


# ---- openclaw metadata -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("block", "reason"),
    [
        (
            {"requires": {"bins": ["no-such-bin-xyz"]}},
            "missing executables on PATH: no-such-bin-xyz",
        ),
        (
            {"requires": {"anyBins": ["no-such-a-xyz", "no-such-b-xyz"]}},
            "none of these executables on PATH: no-such-a-xyz, no-such-b-xyz",
        ),
        (
            {"requires": {"env": ["NO_SUCH_VAR_XYZ"]}},
            "missing environment variables: NO_SUCH_VAR_XYZ",
        ),
        ({"requires": {"config": ["browser.enabled"]}}, "missing config: browser.enabled"),
        ({"os": ["win32"]}, "runs on win32, not on "),
    ],
)
def test_unmet_openclaw_requirements_make_the_skill_unavailable_with_the_reason(
    root: Path, block: dict[str, Any], reason: str
) -> None:
    path = write_skill_md(root, "claw", openclaw("claw", block))
    registry, lines = load([root], bundled=True)
    skill = registry.get("claw")
    assert not skill.available
    assert skill.unavailable_reason is not None and skill.unavailable_reason.startswith(reason)
    assert f'registered instructions skill "claw" from {path} (unavailable: {reason}' in "\n".join(
        lines
    )
    assert "claw" not in [s.name for s in instructions(registry)]  # never offered to a model


@pytest.mark.parametrize("key", ["openclaw", "clawdbot", "clawdis", "moltbot"])
def test_the_older_openclaw_keys_are_honoured(root: Path, key: str) -> None:
    write_skill_md(root, "claw", openclaw("claw", {"requires": {"bins": ["no-such-xyz"]}}, key))
    registry, _ = load([root])
    assert registry.get("claw").unavailable_reason == "missing executables on PATH: no-such-xyz"


def test_met_openclaw_requirements_leave_the_skill_available(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", executable_dir(tmp_path, "uv"))
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    block = {
        "emoji": "🍌",
        "homepage": "https://example.com/banana",
        "primaryEnv": "GEMINI_API_KEY",
        "os": ["darwin", "linux", "win32"],
        "requires": {"bins": ["uv"], "anyBins": ["nope-xyz", "uv"], "env": ["GEMINI_API_KEY"]},
        "requires_unused": True,
        "install": [{"id": "brew", "kind": "brew", "formula": "uv", "bins": ["uv"]}],
    }
    block["requires"]["config"] = ["browser.enabled"]
    write_skill_md(root, "banana", openclaw("banana", block))
    config = ConfigView({"browser.enabled": "true"}, {})
    registry, _ = load([root], config=config)
    skill = registry.get("banana")
    assert skill.available, skill.unavailable_reason
    assert skill.extra is not None
    shown = skill.extra["metadata.openclaw"]
    assert shown["emoji"] == "🍌" and shown["primaryEnv"] == "GEMINI_API_KEY"
    assert shown["install"][0]["formula"] == "uv"  # shown as written, never run


def test_a_false_config_value_or_an_empty_env_var_is_not_met(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMPTY_VAR_XYZ", "")
    write_skill_md(root, "a", openclaw("a_cfg", {"requires": {"config": ["feature.on"]}}))
    write_skill_md(root, "b", openclaw("b_env", {"requires": {"env": ["EMPTY_VAR_XYZ"]}}))
    registry, _ = load([root], config=ConfigView({"feature.on": "false"}, {}))
    assert registry.get("a_cfg").unavailable_reason == "missing config: feature.on"
    assert (
        registry.get("b_env").unavailable_reason == "missing environment variables: EMPTY_VAR_XYZ"
    )


def test_always_skips_the_requirements_but_not_the_os(root: Path) -> None:
    write_skill_md(
        root, "a", openclaw("always", {"always": True, "requires": {"bins": ["nope-x"]}})
    )
    write_skill_md(root, "b", openclaw("elsewhere", {"always": True, "os": ["plan9"]}))
    registry, _ = load([root])
    assert registry.get("always").available
    assert not registry.get("elsewhere").available


def test_openclaw_metadata_written_as_one_line_of_json_is_read(root: Path) -> None:
    front = (
        "name: oneline\ndescription: d\n"
        'metadata: \'{"openclaw": {"requires": {"bins": ["no-such-xyz"]}, "emoji": "x"}}\'\n'
    )
    write_skill_md(root, "oneline", front)
    registry, _ = load([root])
    assert registry.get("oneline").unavailable_reason == "missing executables on PATH: no-such-xyz"


def test_a_malformed_openclaw_field_is_ignored_with_a_warning(root: Path) -> None:
    path = write_skill_md(root, "odd", openclaw("odd", {"requires": {"bins": {"a": 1}}}))
    registry, lines = load([root])
    assert registry.get("odd").available
    assert (
        f"skill loader: warning {path}: metadata.openclaw.requires.bins is not a list of names; "
        "ignored" in lines
    )


# ---- tolerant where the ecosystem is ---------------------------------------------------------
def test_an_unquoted_colon_in_the_description_is_read_line_by_line_with_a_warning(
    root: Path,
) -> None:
    front = (
        "name: pr-review\n"
        "description: Review a PR. Use when: the user asks for a review\n"
        'metadata: {"openclaw": {"emoji": "🔍"}}\n'
    )
    path = write_skill_md(root, "pr-review", front, "# Review\nRead the diff.\n")
    registry, lines = load([root], bundled=True)
    skill = registry.get("pr_review")
    assert skill.description == "Review a PR. Use when: the user asks for a review"
    assert skill.extra == {"metadata.openclaw": {"emoji": "🔍"}, "version": None}
    warning = next(line for line in lines if "not valid YAML" in line)
    assert warning.startswith(f"skill loader: warning {path}: frontmatter is not valid YAML (")
    assert "line 3); read as flat key: value lines, as openclaw does" in warning


def test_the_line_reader_is_used_only_for_that_slip(root: Path) -> None:
    path = write_skill_md(root, "indented", "name: x\ndescription: a: b\n  more: c\n")
    registry, lines = load([root])
    assert "x" not in registry
    assert lines[0].startswith(f"skill loader: parse {path}: frontmatter YAML: ")


@pytest.mark.parametrize(
    "tools",
    [["computer", "code_execution"], [{"name": "web_search"}], "Read, Grep", {"a": 1}],
    ids=["plain strings", "entries without impl", "a string", "a mapping"],
)
def test_tools_in_another_format_are_kept_as_metadata_with_a_warning(
    root: Path, tools: Any
) -> None:
    path = write_skill_md(root, "t", {"name": "foreign", "description": "d", "tools": tools})
    registry, lines = load([root])
    skill = registry.get("foreign")
    assert skill.kind == "instructions"
    assert skill.extra is not None and skill.extra["tools"] == tools
    assert any(
        line.startswith(f"skill loader: warning {path}: tools are not declarations")
        for line in lines
    )


def test_a_lower_case_skill_md_loads_and_a_second_skill_file_in_a_folder_gets_a_line(
    root: Path,
) -> None:
    (root / "lower").mkdir()
    lower = root / "lower" / "skill.md"
    lower.write_text("---\nname: lower\ndescription: d\n---\n")
    (root / "both").mkdir()
    upper = root / "both" / "SKILL.md"
    upper.write_text("---\nname: both\ndescription: d\n---\n")
    second = root / "both" / "skill.md"
    second.write_text("---\nname: both_again\ndescription: d\n---\n")
    registry, lines = load([root])
    assert sorted(registry.skills) == ["both", "lower"]
    assert f"skill loader: skip {second}: {upper} is the skill file of this folder" in lines
    assert f'skill loader: registered instructions skill "lower" from {lower}' in lines


# ---- names as written, pack:name, collisions -------------------------------------------------
def test_the_written_name_and_pack_forms_resolve(tmp_path: Path) -> None:
    root = tmp_path / "obra__superpowers"
    write_skill_md(root / "skills", "tdd", {"name": "test-driven-development", "description": "d"})
    registry, _ = load([root])
    for alias in (
        "test-driven-development",
        "superpowers:test-driven-development",
        "superpowers:test_driven_development",
    ):
        assert registry.resolve(alias).name == "test_driven_development"
    with pytest.raises(UnknownSkill):
        registry.resolve("other:test-driven-development")
    assert "test-driven-development" not in registry  # tool calls use the tool name only


def test_the_plugin_manifest_names_the_pack(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text('{"name": "superpowers"}')
    write_skill_md(root / "skills", "brainstorming", {"name": "brainstorming", "description": "d"})
    registry, lines = load([root])
    assert registry.resolve("superpowers:brainstorming").name == "brainstorming"
    assert not any("pack manifest" in line for line in lines)


def test_a_tools_skill_md_is_reached_by_its_own_name_and_its_tools_by_pack(tmp_path: Path) -> None:
    root = tmp_path / "ops-pack"
    tools = [{"name": "disk_free", "impl": "builtin:files.disk_usage"}]
    write_skill_md(root, "disk", {"name": "Disk Tools", "description": "d", "tools": tools})
    registry, _ = load([root])
    assert registry.resolve("Disk Tools").name == "disk_free"
    assert registry.resolve("ops-pack:disk_free").name == "disk_free"
    assert registry.resolve("disk_tools").name == "disk_free"


def test_names_colliding_once_normalised_get_one_line_naming_both_files(root: Path) -> None:
    first = write_skill_md(root, "a", {"name": "google-admin", "description": "one"})
    second = write_skill_md(root, "b", {"name": "Google Admin", "description": "two"})
    registry, lines = load([root])
    assert registry.get("google_admin").description == "one"
    (line,) = [line for line in lines if "google_admin" in line and "collide" in line]
    assert line == (
        f'skill loader: skill "google_admin": "Google Admin" in {second} and "google-admin" in '
        f"{first} collide once normalised; keeping {first}, skipping {second}"
    )
    assert registry.report.duplicates == 1
    assert registry.resolve("google-admin").description == "one"


# ---- what the author declared is shown --------------------------------------------------------
DECLARED = (
    "name: pdf-helper\n"
    "description: Extract text from PDF files.\n"
    "allowed-tools: Read, Bash\n"
    "license: Apache-2.0\n"
    "version: 1.4.0\n"
    "homepage: https://example.com/pdf\n"
    'metadata: {"openclaw": {"emoji": "📄", "homepage": "https://example.com/claw"}}\n'
)
EXPECTED_EXTRA = {
    "allowed-tools": "Read, Bash",
    "license": "Apache-2.0",
    "homepage": "https://example.com/pdf",
    "metadata.openclaw": {"emoji": "📄", "homepage": "https://example.com/claw"},
    "version": "1.4.0",
}


def test_declared_fields_are_in_show_and_list_json(root: Path, tmp_path: Path) -> None:
    write_skill_md(root, "pdf-helper", DECLARED)
    env = {
        "PATH": os.environ["PATH"],
        "ONGRID_SKILLS_NATIVE_DIRS": str(root),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
    }
    cli = venv_bin("ongrid-skills")
    shown = subprocess.run(
        [cli, "-q", "show", "native:pdf-helper", "--json"], capture_output=True, text=True, env=env
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["extra"] == EXPECTED_EXTRA
    listed = subprocess.run([cli, "-q", "list", "--json"], capture_output=True, text=True, env=env)
    (item,) = json.loads(listed.stdout)["items"]
    assert item["extra"] == EXPECTED_EXTRA
    human = subprocess.run(
        [cli, "-q", "show", "pdf-helper"], capture_output=True, text=True, env=env
    )
    assert 'license:         "Apache-2.0"' in human.stdout
    assert f"folder:          {(root / 'pdf-helper').resolve()}" in human.stdout
    assert "aliases:         pdf-helper, native:pdf-helper, native:pdf_helper" in human.stdout


def test_declared_fields_are_served_by_rest(root: Path, tmp_path: Path) -> None:
    write_skill_md(root, "pdf-helper", DECLARED)
    settings = make_settings(tmp_path, tmp_path / "none", native_dirs=(str(root),))
    with running_app(settings) as server:
        listed = server.call("GET", "/v1/skills", "vera").json()
        one = server.call("GET", "/v1/skills/pdf_helper", "vera").json()
    assert listed["items"][0]["extra"] == EXPECTED_EXTRA
    assert one["extra"] == EXPECTED_EXTRA
