"""SKILL.md (SPEC §6): every frontmatter rule, on real folders loaded by the real loader."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import ApprovalRequired, InvalidArgs, Settings, SkillClass, Status
from ongrid_skills.builtins import prom
from ongrid_skills.builtins.files import disk_usage
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.execution.records import Event
from ongrid_skills.skills.registry import Registry
from ongrid_skills.skills.schemas import signature_schema
from ongrid_skills.toolspec import instructions, offered
from tests.support.skills import executable_dir, load, write_exec, write_skill, write_skill_md

HOST_OS = {"linux": "linux", "darwin": "darwin"}.get(sys.platform, sys.platform)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "native"
    folder.mkdir()
    return folder


def basic(name: str = "hello", **more: Any) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} skill.", **more}


def one_line(lines: list[str], needle: str) -> str:
    found = [line for line in lines if needle in line]
    assert len(found) == 1, (needle, lines)
    return found[0]


# ---- the frontmatter fence and YAML ---------------------------------------------------------
def test_a_minimal_skill_md_is_an_instructions_skill(root: Path) -> None:
    path = write_skill_md(root, "hello", basic(when_to_use="When greeting."), "# Hello\nSay hi.\n")
    registry, lines = load([root])
    skill = registry.get("hello")
    assert skill.kind == "instructions"
    assert skill.category == "instructions"
    assert skill.description == "The hello skill."
    assert skill.when_to_use == "When greeting."
    assert skill.available
    assert skill.origin == str(path)
    assert skill.builtin is None and skill.target is None
    assert lines == [f'skill loader: registered instructions skill "hello" from {path}']


def test_leading_blank_lines_before_the_opening_fence_are_accepted(root: Path) -> None:
    folder = root / "blank"
    folder.mkdir()
    (folder / "SKILL.md").write_text("\n   \n\t\n---\nname: blank\ndescription: d\n---\nbody\n")
    registry, _ = load([root])
    assert registry.get("blank").description == "d"


def test_text_before_the_opening_fence_is_a_parse_error(root: Path) -> None:
    folder = root / "late"
    folder.mkdir()
    path = folder / "SKILL.md"
    path.write_text("# Title\n---\nname: late\ndescription: d\n---\n")
    registry, lines = load([root])
    assert "late" not in registry
    assert lines == [
        f"skill loader: parse {path}: no frontmatter: the first non-blank line must be ---"
    ]
    assert registry.report.errors[0].kind == "parse"


def test_a_file_without_frontmatter_is_refused(root: Path) -> None:
    folder = root / "plain"
    folder.mkdir()
    path = folder / "SKILL.md"
    path.write_text("name: plain\ndescription: just markdown\n")
    registry, lines = load([root])
    assert len(registry) == 0
    assert lines[0].startswith(f"skill loader: parse {path}: no frontmatter")


def test_an_empty_file_is_refused(root: Path) -> None:
    (root / "empty").mkdir()
    (root / "empty" / "SKILL.md").write_text("")
    registry, lines = load([root])
    assert len(registry) == 0
    assert "no frontmatter" in lines[0]


def test_an_unclosed_fence_is_a_parse_error(root: Path) -> None:
    folder = root / "open"
    folder.mkdir()
    path = folder / "SKILL.md"
    path.write_text("---\nname: open\ndescription: never closed\n# Body\n")
    registry, lines = load([root])
    assert "open" not in registry
    assert lines == [
        f"skill loader: parse {path}: frontmatter is not closed: no --- line after the opening one"
    ]


def test_a_missing_name_is_a_build_error_with_an_empty_name(root: Path) -> None:
    path = write_skill_md(root, "anon", {"description": "no name"})
    registry, lines = load([root])
    assert len(registry) == 0
    assert lines == [f'skill loader: build "": name is required (a string) (in {path})']


@pytest.mark.parametrize("description", [None, "", "   ", 42])
def test_a_missing_or_blank_description_is_a_build_error(root: Path, description: Any) -> None:
    front: dict[str, Any] = {"name": "nodesc"}
    if description is not None:
        front["description"] = description
    path = write_skill_md(root, "nodesc", front)
    registry, lines = load([root])
    assert "nodesc" not in registry
    assert lines == [
        f'skill loader: build "nodesc": description is required (a non-blank string) (in {path})'
    ]


def test_an_unsafe_yaml_tag_is_refused_and_never_executed(root: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    front = (
        f"name: evil\ndescription: d\nboom: !!python/object/apply:os.system ['touch {marker}']\n"
    )
    path = write_skill_md(root, "evil", front)
    registry, lines = load([root])
    assert "evil" not in registry
    assert len(lines) == 1
    assert lines[0].startswith(f"skill loader: parse {path}: frontmatter YAML: ")
    assert "could not determine a constructor" in lines[0]
    assert not marker.exists()


def test_frontmatter_that_is_not_a_mapping_is_refused(root: Path) -> None:
    path = write_skill_md(root, "list", "- name: x\n- description: y\n")
    registry, lines = load([root])
    assert len(registry) == 0
    assert lines == [f"skill loader: parse {path}: frontmatter must be a YAML mapping"]


def test_one_broken_skill_md_does_not_block_the_others(root: Path) -> None:
    (root / "a-broken").mkdir()
    (root / "a-broken" / "SKILL.md").write_text("---\nname: [\n---\n")
    write_skill_md(root, "b-fine", basic("fine"))
    registry, lines = load([root])
    assert list(registry.skills) == ["fine"]
    assert len(registry.report.errors) == 1
    assert lines[0].startswith(f"skill loader: parse {root / 'a-broken' / 'SKILL.md'}: ")


# ---- names -----------------------------------------------------------------------------------
def test_a_kebab_case_name_is_normalised_with_a_loader_warning(root: Path) -> None:
    path = write_skill_md(root, "hello-world", basic("hello-world"))
    registry, lines = load([root])
    assert "hello_world" in registry
    assert "hello-world" not in registry
    assert lines == [
        f'skill loader: warning {path}: name "hello-world" normalised to "hello_world"',
        f'skill loader: registered instructions skill "hello_world" from {path}',
    ]


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("Hello World", "hello_world"),
        ("--PDF--Helper--v2--", "pdf_helper_v2"),
        ("a.b/c", "a_b_c"),
        ("snake_case_ok", "snake_case_ok"),
    ],
)
def test_names_are_lowercased_with_runs_of_other_characters_folded(
    root: Path, raw: str, normalised: str
) -> None:
    write_skill_md(root, "x", basic(raw))
    registry, lines = load([root])
    assert list(registry.skills) == [normalised]
    warned = any("normalised to" in line for line in lines)
    assert warned is (raw != normalised)


def test_a_name_without_letters_or_digits_is_refused(root: Path) -> None:
    write_skill_md(root, "x", basic("---"))
    registry, lines = load([root])
    assert len(registry) == 0
    assert "has no letters or digits" in lines[0]


def test_tool_names_are_not_normalised_and_must_be_snake_case(root: Path) -> None:
    folder_md = write_skill_md(
        root, "t", basic("t", tools=[{"name": "bad-tool", "impl": "builtin:files.disk_usage"}])
    )
    registry, lines = load([root])
    assert len(registry) == 0
    assert lines == [
        "skill loader: build \"t\": tools[0].name 'bad-tool' must match [a-z0-9_]+ (≤ 64)"
        f" (in {folder_md})"
    ]


# ---- activation ------------------------------------------------------------------------------
def test_metadata_ongrid_activation_overrides_the_top_level_one_with_a_warning(
    root: Path,
) -> None:
    front = basic(
        "act",
        activation={"mode": "always"},
        metadata={"ongrid": {"activation": {"mode": "keyword", "keywords": ["Disk", "inode"]}}},
    )
    path = write_skill_md(root, "act", front)
    registry, lines = load([root])
    skill = registry.get("act")
    assert skill.activation == "keyword"
    assert skill.keywords == ("disk", "inode")
    assert (
        f"skill loader: warning {path}: metadata.ongrid.activation overrides the top-level "
        "activation"
    ) in lines


def test_equal_activations_at_both_levels_do_not_warn(root: Path) -> None:
    same = {"mode": "always"}
    write_skill_md(
        root, "act", basic("act", activation=same, metadata={"ongrid": {"activation": same}})
    )
    registry, lines = load([root])
    assert registry.get("act").activation == "always"
    assert not any("warning" in line for line in lines)


def test_top_level_activation_alone_applies(root: Path) -> None:
    write_skill_md(root, "kw", basic("kw", activation={"mode": "keyword", "keywords": ["nginx"]}))
    registry, _ = load([root])
    assert registry.get("kw").activation == "keyword"
    assert registry.get("kw").keywords == ("nginx",)


@pytest.mark.parametrize(
    "activation",
    [{"mode": "sometimes"}, {"mode": "keyword"}, {"mode": "keyword", "keywords": "disk"}, "always"],
)
def test_a_malformed_activation_is_a_build_error(root: Path, activation: Any) -> None:
    write_skill_md(root, "bad", basic("bad", activation=activation))
    registry, lines = load([root])
    assert "bad" not in registry
    assert lines[0].startswith('skill loader: build "bad": ')
    assert "activation" in lines[0]


# ---- unknown keys ----------------------------------------------------------------------------
def test_unknown_keys_are_kept_in_extra_with_a_warning(root: Path) -> None:
    front = basic(
        "claude_style",
        version="1.2.0",
        license="MIT",
        metadata={"openclaw": {"emoji": "🦞", "requires": {"anyBins": ["rg"]}}},
    )
    front["allowed-tools"] = "Read, Grep"
    path = write_skill_md(root, "claude-style", front)
    registry, lines = load([root])
    skill = registry.get("claude_style")
    assert skill.extra == {
        "license": "MIT",
        "allowed-tools": "Read, Grep",
        "metadata.openclaw": {"emoji": "🦞", "requires": {"anyBins": ["rg"]}},
        "version": "1.2.0",
    }
    for key in ("license", "allowed-tools"):
        assert f"skill loader: warning {path}: unknown key {key!r} is kept and shown, not used" in (
            lines
        )
    # openclaw's block is used now (its requirements decide availability): not "not used"
    assert not any("unknown key 'metadata.openclaw'" in line for line in lines)


def test_a_skill_without_unknown_keys_has_no_extra(root: Path) -> None:
    write_skill_md(root, "plain", basic("plain", metadata={"os": [HOST_OS]}))
    registry, lines = load([root])
    assert registry.get("plain").extra is None
    assert not any("warning" in line for line in lines)


# ---- discovery -------------------------------------------------------------------------------
def test_skill_md_files_are_found_at_any_depth_in_lexical_depth_first_order(root: Path) -> None:
    deep = write_skill_md(root, "a/b/c/d", basic("deep"))
    top = write_skill_md(root, "b", basic("top"))
    middle = write_skill_md(root, "a/b", basic("middle"))
    (root / "a" / "notes.md").write_text("---\nname: not_a_skill\ndescription: d\n---\n")
    registry, lines = load([root])
    assert sorted(registry.skills) == ["deep", "middle", "top"]
    assert lines == [
        f'skill loader: registered instructions skill "middle" from {middle}',
        f'skill loader: registered instructions skill "deep" from {deep}',
        f'skill loader: registered instructions skill "top" from {top}',
    ]


def test_a_symlinked_skill_md_pointing_outside_the_root_is_refused(
    root: Path, tmp_path: Path
) -> None:
    outside = write_skill_md(tmp_path / "elsewhere", "x", basic("outsider"))
    (root / "link").mkdir()
    link = root / "link" / "SKILL.md"
    link.symlink_to(outside)
    registry, lines = load([root])
    assert "outsider" not in registry
    assert lines == [
        f"skill loader: parse {link}: symlink to {outside} escapes allowlist root {root}"
    ]


def test_a_symlinked_folder_is_not_descended_into(root: Path, tmp_path: Path) -> None:
    write_skill_md(tmp_path / "elsewhere", "x", basic("outsider"))
    (root / "linked").symlink_to(tmp_path / "elsewhere" / "x", target_is_directory=True)
    registry, _ = load([root])
    assert "outsider" not in registry


def test_name_collisions_first_wins_bundled_then_native_dirs_then_external(
    tmp_path: Path,
) -> None:
    first = tmp_path / "native1"
    second = tmp_path / "native2"
    external = tmp_path / "external"
    shadow = write_skill_md(first, "probe", basic("probe_tcp"))
    winner = write_skill_md(first, "shared", basic("shared"))
    loser = write_skill_md(second, "shared", basic("shared"))
    ext_shared = write_skill(external, "shared", folder="shared") / "skill.json"
    write_skill(external, "ext_only", folder="ext-only")
    registry, lines = load([first, second], [external], bundled=True)
    assert registry.get("probe_tcp").source == "builtin"
    assert registry.get("probe_tcp").kind == "native"
    assert registry.get("shared").origin == str(winner)
    assert registry.get("shared").kind == "instructions"
    assert registry.get("ext_only").kind == "subprocess"
    for path in (shadow, loser, ext_shared):
        name = "probe_tcp" if path == shadow else "shared"
        assert f'skill loader: skill "{name}" already registered, skipping {path}' in lines
    assert registry.report.duplicates == 3


# ---- availability ----------------------------------------------------------------------------
def test_metadata_os_not_matching_makes_the_skill_unavailable_with_the_reason(
    root: Path,
) -> None:
    other = "windows" if HOST_OS != "windows" else "plan9"
    front = basic(
        "elsewhere",
        metadata={"os": [other]},
        tools=[{"name": "elsewhere_tool", "impl": "builtin:files.disk_usage"}],
    )
    path = write_skill_md(root, "elsewhere", front)
    registry, lines = load([root])
    skill = registry.get("elsewhere_tool")
    assert not skill.available
    assert skill.unavailable_reason == f"runs on {other}, not on {HOST_OS}"
    assert lines == [
        f'skill loader: registered native skill "elsewhere_tool" from {path} '
        f"(unavailable: runs on {other}, not on {HOST_OS})"
    ]
    assert offered(registry) == []


def test_metadata_os_matching_this_host_is_available_case_insensitively(root: Path) -> None:
    write_skill_md(root, "here", basic("here", metadata={"os": [HOST_OS.upper(), "plan9"]}))
    registry, _ = load([root])
    assert registry.get("here").available


def test_a_missing_required_executable_makes_the_skill_unavailable(root: Path) -> None:
    bins = ["sh", "ongrid-no-such-binary-1", "ongrid-no-such-binary-2"]
    write_skill_md(root, "bins", basic("bins", metadata={"requires": {"bins": bins}}))
    registry, _ = load([root])
    skill = registry.get("bins")
    assert not skill.available
    assert skill.unavailable_reason == (
        "missing executables on PATH: ongrid-no-such-binary-1, ongrid-no-such-binary-2"
    )


def test_a_required_executable_present_on_path_makes_the_skill_available(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", executable_dir(tmp_path, "ongrid-fake-tool"))
    write_skill_md(
        root, "bins", basic("bins", metadata={"requires": {"bins": ["ongrid-fake-tool"]}})
    )
    registry, _ = load([root])
    assert registry.get("bins").available
    assert registry.get("bins").unavailable_reason is None


def prom_skill(root: Path) -> None:
    front = basic(
        "promish",
        metadata={"requires": {"config": ["prometheus.url"]}},
        tools=[{"name": "promish_query", "impl": "builtin:prom.query_promql"}],
    )
    write_skill_md(root, "promish", front)


def test_missing_required_config_makes_the_skill_unavailable(root: Path) -> None:
    prom_skill(root)
    registry, _ = load([root])
    skill = registry.get("promish_query")
    assert not skill.available
    assert skill.unavailable_reason == "missing config: prometheus.url"


def test_required_config_given_as_a_mapping_makes_the_skill_available(root: Path) -> None:
    prom_skill(root)
    registry, _ = load([root], config={"prometheus.url": "http://127.0.0.1:9"})
    assert registry.get("promish_query").available


def test_required_config_from_the_environment_through_settings_makes_it_available(
    root: Path,
) -> None:
    prom_skill(root)
    settings = Settings.load(environ={"ONGRID_PROMETHEUS_URL": "http://x"})
    assert settings.config_value("prometheus.url") == "http://x"
    registry = ongrid_skills.load_registry(
        native_dirs=[str(root)],
        external_dirs=[],
        persona_dirs=[],
        bundled=False,
        settings=settings,
        log=lambda _line: None,
    )
    skill = registry.get("promish_query")
    assert skill.available, skill.unavailable_reason


def test_required_config_from_the_settings_file_makes_it_available(
    root: Path, tmp_path: Path
) -> None:
    prom_skill(root)
    toml = tmp_path / "ongrid.toml"
    toml.write_text('[config.prometheus]\nurl = "http://127.0.0.1:9"\n')
    settings = Settings.load(environ={}, config=str(toml))
    registry = ongrid_skills.load_registry(
        native_dirs=[str(root)],
        external_dirs=[],
        persona_dirs=[],
        bundled=False,
        settings=settings,
        log=lambda _line: None,
    )
    assert registry.get("promish_query").available


@pytest.mark.parametrize(
    "metadata",
    [
        {"os": "linux"},
        {"requires": ["sh"]},
        {"requires": {"bins": "sh"}},
        {"requires": {"config": [1]}},
        ["os"],
    ],
)
def test_malformed_metadata_is_a_build_error(root: Path, metadata: Any) -> None:
    write_skill_md(root, "meta", basic("meta", metadata=metadata))
    registry, lines = load([root])
    assert "meta" not in registry
    assert lines[0].startswith('skill loader: build "meta": metadata')


# ---- builtin impls ---------------------------------------------------------------------------
def test_an_unknown_builtin_impl_is_listed_unavailable_with_the_reason(root: Path) -> None:
    front = basic(
        "mixed",
        tools=[
            {"name": "nope_tool", "impl": "builtin:nope.nothing"},
            {"name": "usage_tool", "impl": "builtin:files.disk_usage"},
        ],
    )
    path = write_skill_md(root, "mixed", front)
    registry, lines = load([root])
    nope = registry.get("nope_tool")
    assert not nope.available
    assert nope.unavailable_reason == "unknown impl builtin:nope.nothing"
    assert [s.name for s in registry.list()] == ["nope_tool", "usage_tool"]
    assert (
        f'skill loader: registered native skill "nope_tool" from {path} '
        "(unavailable: unknown impl builtin:nope.nothing)"
    ) in lines
    assert [s.name for s in offered(registry)] == ["usage_tool"]


def test_an_unavailable_tool_is_refused_when_called(root: Path) -> None:
    tools = [
        {"name": "nope_tool", "impl": "builtin:x.y"},
        {"name": "usage_tool", "impl": "builtin:files.disk_usage"},
    ]
    write_skill_md(root, "n", basic("n", tools=tools))
    registry, _ = load([root])
    with pytest.raises(ongrid_skills.Denied) as info:
        asyncio.run(ongrid_skills.execute(registry, "nope_tool", {}))
    assert info.value.message == ("skill nope_tool is unavailable: unknown impl builtin:x.y")


@pytest.mark.parametrize(
    ("impl", "reason"),
    [
        ("builtin:nope.nothing", "unknown impl builtin:nope.nothing"),
        ("wasm:cache.wasm", "impl kind 'wasm' does not exist in this build"),
    ],
)
def test_a_skill_md_whose_every_impl_this_build_lacks_loads_as_instructions(
    root: Path, impl: str, reason: str
) -> None:
    tools = [{"name": "cache_gone", "impl": impl}, {"name": "cache_purge", "impl": impl}]
    body = "# Cache\nPurge with care: drain the node first.\n"
    path = write_skill_md(root, "cache", basic("cache", tools=tools), body)
    registry, lines = load([root])
    skill = registry.get("cache")
    assert (skill.kind, skill.available) == ("instructions", True)
    assert skill.unavailable_tools == (
        ("cache_gone", impl, reason),
        ("cache_purge", impl, reason),
    )
    assert skill.summary()["unavailable_tools"][0] == {
        "name": "cache_gone",
        "impl": impl,
        "reason": reason,
    }
    assert "cache_gone" not in registry and "cache_purge" not in registry
    assert [s.name for s in instructions(registry)] == ["cache"]  # its text reaches the model
    assert offered(registry) == []
    with_catalogue, _ = load([root], bundled=True)
    read = asyncio.run(ongrid_skills.execute(with_catalogue, "read_skill", {"name": "cache"}))
    assert "drain the node first" in read.result["body"]
    assert [t["name"] for t in read.result["unavailable_tools"]] == ["cache_gone", "cache_purge"]
    assert [w.code for w in registry.report.warnings] == ["impl_unavailable"]
    assert any(
        line.startswith(f"skill loader: warning {path}: no tool's impl exists in this build")
        for line in lines
    )


def test_the_go_style_alias_resolves_to_the_python_builtin(root: Path) -> None:
    front = basic("q", tools=[{"name": "q_tool", "impl": "builtin:prom.QueryPromQL"}])
    write_skill_md(root, "q", front)
    registry, _ = load([root])
    skill = registry.get("q_tool")
    assert skill.available
    assert skill.builtin is prom.query_promql
    assert skill.kind == "native"


def test_a_builtin_schema_is_derived_from_the_signature_when_absent(root: Path) -> None:
    write_skill_md(
        root, "u", basic("u", tools=[{"name": "u_tool", "impl": "builtin:files.disk_usage"}])
    )
    registry, _ = load([root])
    schema = registry.get("u_tool").schema
    assert schema == signature_schema(disk_usage)
    assert schema["type"] == "object"
    assert "path" in schema["properties"]
    assert "ctx" not in schema["properties"]


def test_a_declared_schema_wins_over_the_signature(root: Path) -> None:
    declared = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/"}}}
    front = basic(
        "u", tools=[{"name": "u_tool", "impl": "builtin:files.disk_usage", "schema": declared}]
    )
    write_skill_md(root, "u", front)
    registry, _ = load([root])
    assert registry.get("u_tool").schema == declared
    with pytest.raises(InvalidArgs) as info:
        asyncio.run(ongrid_skills.execute(registry, "u_tool", {"path": "relative"}))
    assert [v.pointer for v in info.value.violations] == ["/path"]


@pytest.mark.parametrize(
    "schema",
    [{"type": "array"}, {"type": "object", "properties": {"a": {"type": "nope"}}}, "string"],
)
def test_an_invalid_declared_schema_is_a_build_error(root: Path, schema: Any) -> None:
    front = basic(
        "s", tools=[{"name": "s_tool", "impl": "builtin:files.disk_usage", "schema": schema}]
    )
    write_skill_md(root, "s", front)
    registry, lines = load([root])
    assert "s_tool" not in registry
    assert lines[0].startswith('skill loader: build "s_tool": tools[0]: schema')


@pytest.mark.parametrize("impl", ["disk_usage", "", 3])
def test_a_malformed_impl_is_a_build_error(root: Path, impl: Any) -> None:
    write_skill_md(root, "i", basic("i", tools=[{"name": "i_tool", "impl": impl}]))
    registry, lines = load([root])
    assert "i_tool" not in registry
    assert lines[0].startswith('skill loader: build "i_tool": tools[0].impl')


# ---- classes, confirmation, timeouts ---------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("read", SkillClass.SAFE),
        ("write", SkillClass.MUTATING),
        ("destructive", SkillClass.DANGEROUS),
        ("safe", SkillClass.SAFE),
        ("mutating", SkillClass.MUTATING),
        ("dangerous", SkillClass.DANGEROUS),
        (None, SkillClass.SAFE),
    ],
)
def test_class_names_and_their_aliases(root: Path, given: str | None, expected: SkillClass) -> None:
    tool: dict[str, Any] = {"name": "c_tool", "impl": "builtin:files.disk_usage"}
    if given is not None:
        tool["class"] = given
    write_skill_md(root, "c", basic("c", tools=[tool]))
    registry, _ = load([root])
    assert registry.get("c_tool").skill_class is expected


def test_an_unknown_class_is_a_build_error(root: Path) -> None:
    tool = {"name": "c_tool", "impl": "builtin:files.disk_usage", "class": "harmless"}
    write_skill_md(root, "c", basic("c", tools=[tool]))
    registry, lines = load([root])
    assert "c_tool" not in registry
    assert "tools[0].class 'harmless' is not a class" in lines[0]


def confirm_skill(root: Path) -> Registry:
    tool = {"name": "careful", "impl": "exec:run.sh", "class": "read", "confirmation": "required"}
    write_skill_md(root, "careful", basic("careful", tools=[tool]))
    write_exec(root / "careful", "run.sh")
    registry, _ = load([root])
    return registry


def test_confirmation_required_makes_a_safe_tool_need_one_confirmation(root: Path) -> None:
    registry = confirm_skill(root)
    skill = registry.get("careful")
    assert skill.skill_class is SkillClass.SAFE
    assert skill.confirmation_required
    with pytest.raises(ApprovalRequired) as info:
        asyncio.run(ongrid_skills.execute(registry, "careful", {}))
    assert info.value.signatures_required == 1
    done = asyncio.run(ongrid_skills.execute(registry, "careful", {}, confirm=True))
    assert done.status is Status.SUCCEEDED
    assert done.result == {"ok": True}


def test_timeout_seconds_is_read_and_defaults_to_the_default_timeout(root: Path) -> None:
    tools = [
        {"name": "quick", "impl": "builtin:files.disk_usage", "timeout_seconds": 7},
        {"name": "usual", "impl": "builtin:files.disk_usage"},
    ]
    write_skill_md(root, "t", basic("t", tools=tools))
    registry, _ = load([root])
    assert registry.get("quick").timeout_seconds == 7
    assert registry.get("usual").timeout_seconds == 30


@pytest.mark.parametrize("timeout", [-1, "10", 1.5, True, 86401])
def test_a_malformed_timeout_is_a_build_error(root: Path, timeout: Any) -> None:
    tool = {"name": "t_tool", "impl": "builtin:files.disk_usage", "timeout_seconds": timeout}
    write_skill_md(root, "t", basic("t", tools=[tool]))
    registry, lines = load([root])
    assert "t_tool" not in registry
    assert "timeout_seconds must be an integer" in lines[0]


def test_tools_inherit_the_skill_description_and_when_to_use_unless_they_give_their_own(
    root: Path,
) -> None:
    tools = [
        {
            "name": "own",
            "impl": "builtin:files.disk_usage",
            "description": "Own.",
            "when_to_use": "Own time.",
        },
        {"name": "inherited", "impl": "builtin:files.disk_usage"},
    ]
    write_skill_md(root, "g", basic("group", when_to_use="Group time.", tools=tools))
    registry, _ = load([root])
    assert (registry.get("own").description, registry.get("own").when_to_use) == (
        "Own.",
        "Own time.",
    )
    inherited = registry.get("inherited")
    assert (inherited.description, inherited.when_to_use) == ("The group skill.", "Group time.")
    assert {registry.get(n).group for n in ("own", "inherited")} == {"group"}
    assert "group" not in registry  # a SKILL.md with tools is its tools, not a skill of its own


# ---- exec impls ------------------------------------------------------------------------------
ECHO_SCRIPT = """#!/bin/sh
args=$(cat)
echo "working in $(pwd)" >&2
printf '{"cwd": "%s", "args": %s, "token": "%s", "home": "%s"}\\n' \\
  "$(pwd)" "$args" "$ONGRID_TEST_TOKEN" "$HOME"
"""


def test_an_exec_tool_runs_through_the_subprocess_runner_in_its_folder(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_TEST_TOKEN", "s3cret")
    monkeypatch.setenv("HOME", "/home/not-passed")
    tool = {
        "name": "run_it",
        "impl": "exec:scripts/run.sh",
        "class": "write",
        "env_allow": ["ONGRID_TEST_TOKEN"],
    }
    write_skill_md(root, "runner", basic("runner", tools=[tool]))
    entry = write_exec(root / "runner", "scripts/run.sh", ECHO_SCRIPT)
    registry, _ = load([root])
    skill = registry.get("run_it")
    assert skill.kind == "subprocess"
    assert skill.skill_class is SkillClass.MUTATING
    assert skill.target is not None
    assert skill.target.entry == os.path.realpath(entry)
    assert skill.target.env_allow == ("ONGRID_TEST_TOKEN",)
    events: list[Event] = []
    done = asyncio.run(
        ongrid_skills.execute(registry, "run_it", {"n": 1}, confirm=True, on_event=events.append)
    )
    assert done.status is Status.SUCCEEDED, done.error
    folder = os.path.realpath(root / "runner")
    assert done.result == {"cwd": folder, "args": {"n": 1}, "token": "s3cret", "home": ""}
    assert done.result_text == (  # verbatim, not re-serialised
        f'{{"cwd": "{folder}", "args": {{"n":1}}, "token": "s3cret", "home": ""}}'
    )
    assert [e.data["line"] for e in events if e.type == "stderr"] == [f"working in {folder}"]
    assert done.stderr_tail == f"working in {folder}\n"


def test_an_exec_tool_honours_its_timeout(root: Path) -> None:
    tool = {"name": "slow", "impl": "exec:slow.sh", "timeout_seconds": 1}
    write_skill_md(root, "slow", basic("slow", tools=[tool]))
    write_exec(root / "slow", "slow.sh", "#!/bin/sh\nexec sleep 10\n")
    registry, _ = load([root])
    started = time.monotonic()
    done = asyncio.run(ongrid_skills.execute(registry, "slow", {}))
    assert done.status is Status.TIMED_OUT
    assert time.monotonic() - started < 8


def test_an_exec_path_escaping_the_root_with_dotdot_is_a_build_error(
    root: Path, tmp_path: Path
) -> None:
    evil = write_exec(tmp_path, "evil.sh")
    tool = {"name": "esc", "impl": "exec:../../evil.sh"}
    path = write_skill_md(root, "esc", basic("esc", tools=[tool]))
    registry, lines = load([root])
    assert "esc" not in registry
    assert lines == [
        f'skill loader: build "esc": entry {evil} escapes allowlist root {root} (in {path})'
    ]


def test_an_exec_path_escaping_the_root_through_a_symlink_is_a_build_error(
    root: Path, tmp_path: Path
) -> None:
    evil = write_exec(tmp_path, "evil.sh")
    (root / "lnk" / "scripts").mkdir(parents=True)
    (root / "lnk" / "scripts" / "run.sh").symlink_to(evil)
    path = write_skill_md(
        root, "lnk", basic("lnk", tools=[{"name": "lnk", "impl": "exec:scripts/run.sh"}])
    )
    registry, lines = load([root])
    assert "lnk" not in registry
    assert lines == [
        f'skill loader: build "lnk": entry {evil} escapes allowlist root {root} (in {path})'
    ]


def test_an_exec_path_that_is_absolute_is_contained_too(root: Path, tmp_path: Path) -> None:
    evil = write_exec(tmp_path, "evil.sh")
    write_skill_md(root, "abs", basic("abs", tools=[{"name": "abs", "impl": f"exec:{evil}"}]))
    registry, lines = load([root])
    assert "abs" not in registry
    assert "escapes allowlist root" in lines[0]


def test_an_exec_path_reaching_into_a_sibling_skill_folder_is_a_build_error(root: Path) -> None:
    write_skill_md(
        root, "other", basic("other", tools=[{"name": "other_run", "impl": "exec:run.sh"}])
    )
    theirs = write_exec(root / "other", "run.sh")
    tool = {"name": "borrow", "impl": "exec:../other/run.sh"}
    path = write_skill_md(root, "mine", basic("mine", tools=[tool]))
    registry, lines = load([root])
    assert "borrow" not in registry
    assert "other_run" in registry  # the sibling itself is fine
    assert (
        f'skill loader: build "borrow": entry {theirs} escapes skill folder {root / "mine"} '
        f"(in {path})"
    ) in lines


@pytest.mark.parametrize("link", ["file", "folder"])
def test_an_exec_path_reaching_a_sibling_through_a_symlink_is_a_build_error(
    root: Path, link: str
) -> None:
    theirs = write_exec(root / "other", "scripts/run.sh")
    mine = root / "mine"
    if link == "file":
        (mine / "scripts").mkdir(parents=True)
        (mine / "scripts" / "run.sh").symlink_to(theirs)
    else:
        mine.mkdir()
        (mine / "scripts").symlink_to(root / "other" / "scripts")
    tool = {"name": "borrow", "impl": "exec:scripts/run.sh"}
    path = write_skill_md(root, "mine", basic("mine", tools=[tool]))
    registry, lines = load([root])
    assert "borrow" not in registry
    assert lines == [
        f'skill loader: build "borrow": entry {theirs} escapes skill folder {mine} (in {path})'
    ]


def test_an_exec_entry_swapped_for_a_symlink_to_a_sibling_after_load_is_not_spawned(
    root: Path,
) -> None:
    marker = root / "other" / "ran"
    theirs = write_exec(root / "other", "run.sh", f"#!/bin/sh\n: > {marker}\necho '{{}}'\n")
    write_skill_md(root, "mine", basic("mine", tools=[{"name": "mine_run", "impl": "exec:run.sh"}]))
    mine = write_exec(root / "mine", "run.sh")
    registry, _ = load([root])
    mine.unlink()
    mine.symlink_to(theirs)

    done = asyncio.run(ongrid_skills.execute(registry, "mine_run", {}))

    assert done.status is Status.FAILED
    assert done.error is not None
    assert done.error.code == "entry_rejected"
    assert f"escapes skill folder {root / 'mine'}" in done.error.message
    assert not marker.exists()


def test_an_exec_symlink_staying_inside_the_skill_folder_is_accepted(root: Path) -> None:
    real = write_exec(root / "mine", "lib/run.sh")
    (root / "mine" / "run.sh").symlink_to(real)
    write_skill_md(root, "mine", basic("mine", tools=[{"name": "mine_run", "impl": "exec:run.sh"}]))
    registry, _ = load([root])
    target = registry.get("mine_run").target
    assert target is not None
    assert target.entry == str(real)


@pytest.mark.parametrize(
    ("make", "problem"),
    [("missing", "does not exist"), ("plain", "is not executable")],
)
def test_an_exec_entry_must_exist_and_be_executable(root: Path, make: str, problem: str) -> None:
    write_skill_md(root, "e", basic("e", tools=[{"name": "e_tool", "impl": "exec:run.sh"}]))
    if make == "plain":
        (root / "e" / "run.sh").write_text("#!/bin/sh\n")
    registry, lines = load([root])
    assert "e_tool" not in registry
    assert problem in lines[0]


# ---- a Claude Code skill folder, unchanged ---------------------------------------------------
CLAUDE_BODY = """# PDF helper

Extract text with `scripts/extract.py`, then summarise it.
See reference.md for the form fields.
"""


def claude_folder(root: Path) -> Path:
    front = (
        "name: pdf-helper\n"
        "description: Extract text and tables from PDF files, fill PDF forms.\n"
        "allowed-tools: Read, Bash\n"
        "license: Complete terms in LICENSE.txt\n"
    )
    path = write_skill_md(root, "pdf-helper", front, CLAUDE_BODY)
    write_exec(root / "pdf-helper", "scripts/extract.py", "#!/usr/bin/env python3\nprint('x')\n")
    (root / "pdf-helper" / "reference.md").write_text("# Reference\n")
    (root / "pdf-helper" / "LICENSE.txt").write_text("Terms.\n")
    return path


def test_a_claude_code_skill_folder_loads_unchanged_as_an_instructions_skill(root: Path) -> None:
    path = claude_folder(root)
    registry, lines = load([root])
    assert list(registry.skills) == ["pdf_helper"]
    skill = registry.get("pdf_helper")
    assert skill.kind == "instructions"
    assert skill.available
    assert skill.summary()["kind"] == "instructions"
    assert skill.extra is not None
    assert skill.extra["allowed-tools"] == "Read, Bash"
    assert skill.extra["license"] == "Complete terms in LICENSE.txt"
    assert lines[-1] == f'skill loader: registered instructions skill "pdf_helper" from {path}'
    assert not registry.report.errors


def test_read_skill_returns_the_body_of_a_claude_code_skill(root: Path) -> None:
    claude_folder(root)
    registry, _ = load([root], bundled=True)
    done = asyncio.run(ongrid_skills.execute(registry, "read_skill", {"name": "pdf_helper"}))
    assert done.status is Status.SUCCEEDED, done.error
    assert done.result["body"] == CLAUDE_BODY
    assert done.result["kind"] == "instructions"
    assert done.result["tools"] == []
    assert done.result["description"].startswith("Extract text and tables")


def test_executing_an_instructions_skill_is_refused_with_a_clear_error(root: Path) -> None:
    claude_folder(root)
    registry, _ = load([root])
    with pytest.raises(InvalidRequest) as info:
        asyncio.run(ongrid_skills.execute(registry, "pdf_helper", {}))
    assert info.value.code == "invalid_request"
    assert info.value.message == "pdf_helper is an instructions skill: read it with read_skill"


def test_an_empty_tools_list_is_an_instructions_skill(root: Path) -> None:
    write_skill_md(root, "e", basic("empty_tools", tools=[]))
    registry, _ = load([root])
    assert registry.get("empty_tools").kind == "instructions"
