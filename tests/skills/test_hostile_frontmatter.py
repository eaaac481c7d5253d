"""Hostile frontmatter cannot hurt the loader, the server or what they print: a zoo of YAML
(alias bombs, recursive aliases, deep nesting, huge values, object tags, duplicate keys) refused
with a clear parse error naming the line, for SKILL.md and persona files alike; byte-order marks,
CRLF line ends and tabs where YAML allows them load; stored fields are size-capped; pack
manifests that cannot be read leave the folder's pack name in place."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.declared import MAX_FIELD_BYTES, MAX_TEXT_CHARS
from ongrid_skills.skills.persona import load_persona
from tests.support.mcp import venv_bin
from tests.support.skills import load

# A 1.4 KB file whose aliases expand to 10^9 leaves: printed, it is hundreds of MB.
LAUGHS = "\n".join(
    ['lol0: &l0 "lol"', *(f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9))]
)
DEEP_FLOW = "deep: " + "[" * 40 + "]" * 40
VERY_DEEP_FLOW = "deep: " + "[" * 5000 + "]" * 5000

#: (case, frontmatter lines after name and description, what the error says)
REFUSED = [
    ("billion laughs", LAUGHS, "expands to"),
    ("recursive alias", "loop: &a [*a]", "refers to a node that contains it"),
    ("nesting over the limit", DEEP_FLOW, "nested more than 32 levels deep"),
    ("nesting past the parser", VERY_DEEP_FLOW, "nesting depth"),
    ("huge scalar", "blob: " + "x" * 20_000, "a value of 20000 characters"),
    ("huge integer", "n: " + "9" * 5000, "a number of 5000 characters"),
    ("python object tag", "boom: !!python/object/apply:os.system ['true']", "!!python/object"),
    ("python name tag", "f: !!python/name:os.system", "!!python/name:os.system"),
    ("binary tag", "b: !!binary aGVsbG8=", "!!binary"),
    ("set tag", "s: !!set {a: null}", "!!set"),
    ("local tag", "t: !custom value", "!custom"),
    ("duplicate key", "name: again", "duplicate key 'name'"),
    ("complex key", "? [a, b]\n: c", "a mapping key must be a plain value"),
    ("tab indentation", "metadata:\n\tos: [linux]", "frontmatter YAML:"),
]


def skill_md(folder: Path, extra: str, *, name: str = "hostile", prefix: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(f"{prefix}---\nname: {name}\ndescription: d\n{extra}\n---\nbody\n")
    return path


def persona_md(folder: Path, extra: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "p.md"
    path.write_text(f"---\nname: p\ndescription: d\nwhen_to_use: w\n{extra}\n---\nYou are p.\n")
    return path


@pytest.mark.parametrize(("case", "extra", "says"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_hostile_skill_md_is_refused_with_a_parse_error_and_the_rest_loads(
    tmp_path: Path, case: str, extra: str, says: str
) -> None:
    root = tmp_path / "native"
    bad = skill_md(root / "a-bad", extra)
    skill_md(root / "b-fine", "", name="fine")
    started = time.monotonic()
    registry, lines = load([root])
    assert time.monotonic() - started < 5, case  # the alias bomb once took 13 s to print
    assert list(registry.skills) == ["fine"], lines
    (error,) = registry.report.errors
    assert error.kind == "parse"
    assert error.line >= 4  # the line of the offending value, past the fence, name, description
    assert lines[0].startswith(f"skill loader: parse {bad}: "), lines[0]
    assert says in lines[0], lines[0]
    assert len(lines[0]) < 400  # the line itself stays short


@pytest.mark.parametrize(("case", "extra", "says"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_hostile_persona_file_is_refused_the_same_way(
    tmp_path: Path, case: str, extra: str, says: str
) -> None:
    with pytest.raises(ManifestError) as info:
        load_persona(str(persona_md(tmp_path, extra)))
    assert info.value.kind == "parse", case
    assert says in info.value.message


def test_a_hostile_persona_in_a_persona_dir_is_skipped_with_a_line(tmp_path: Path) -> None:
    personas = tmp_path / "personas"
    bad = persona_md(personas, LAUGHS)
    registry, lines = load(personas=[personas])
    assert list(registry.personas) == ["default", "coordinator"]  # the bundled ones
    assert any(line.startswith(f"skill loader: persona parse {bad}: ") for line in lines), lines


def test_the_object_tag_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    extra = f"boom: !!python/object/apply:os.system ['touch {marker}']"
    skill_md(tmp_path / "native" / "x", extra)
    registry, _ = load([tmp_path / "native"])
    assert "hostile" not in registry
    with pytest.raises(ManifestError):
        load_persona(str(persona_md(tmp_path / "personas", extra)))
    assert not marker.exists()


def test_show_answers_at_once_on_an_alias_bomb(tmp_path: Path) -> None:
    root = tmp_path / "native"
    bad = skill_md(root / "bomb", LAUGHS)
    env = {
        "PATH": os.environ["PATH"],
        "ONGRID_SKILLS_NATIVE_DIRS": str(root),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [venv_bin("ongrid-skills"), "show", "hostile", "--json", "-v"],  # -v: the loader lines
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert len(done.stdout) < 1000
    assert f"skill loader: parse {bad}: frontmatter YAML: expands to" in done.stderr


# ---- what YAML allows loads ------------------------------------------------------------------
def test_a_byte_order_mark_crlf_line_ends_and_a_tab_after_a_colon_load(tmp_path: Path) -> None:
    root = tmp_path / "native"
    (root / "bom").mkdir(parents=True)
    (root / "bom" / "SKILL.md").write_bytes(b"\xef\xbb\xbf---\nname: bom\ndescription: d\n---\nb\n")
    (root / "crlf").mkdir()
    (root / "crlf" / "SKILL.md").write_bytes(
        b"---\r\nname: crlf\r\ndescription: two\r\n  lines\r\n---\r\nbody\r\n"
    )
    (root / "tab").mkdir()
    (root / "tab" / "SKILL.md").write_text("---\nname:\ttabbed\ndescription:\td\n---\n")
    registry, lines = load([root])
    assert sorted(registry.skills) == ["bom", "crlf", "tabbed"], lines
    assert registry.get("crlf").description == "two lines"
    assert not registry.report.errors


def test_dates_and_non_finite_numbers_are_kept_as_text(tmp_path: Path) -> None:
    root = tmp_path / "native"
    skill_md(root / "dated", "released: 2024-05-01\nratio: .nan\nwhen: 2024-05-01 10:00:00")
    registry, _ = load([root])
    skill = registry.get("hostile")
    assert skill.extra is not None
    assert skill.extra["released"] == "2024-05-01"
    assert skill.extra["ratio"] == "nan"
    assert skill.extra["when"] == "2024-05-01 10:00:00"  # the text as written
    json.loads(registry.summary_json(skill))  # what GET /v1/skills serves is valid JSON


def test_anchors_and_merge_keys_within_the_limits_load(tmp_path: Path) -> None:
    root = tmp_path / "native"
    extra = "base: &base {a: 1, b: 2}\nderived:\n  <<: *base\n  c: 3\ncopy: *base"
    skill_md(root / "anchors", extra)
    registry, lines = load([root])
    skill = registry.get("hostile")
    assert skill.extra is not None, lines
    assert skill.extra["derived"] == {"a": 1, "b": 2, "c": 3}
    assert skill.extra["copy"] == {"a": 1, "b": 2}


def test_frontmatter_over_64_kib_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "native"
    many = "\n".join(f"k{i}: {'v' * 60}" for i in range(1200))
    bad = skill_md(root / "big", many)
    registry, lines = load([root])
    assert "hostile" not in registry
    assert lines[0].startswith(f"skill loader: parse {bad}: frontmatter is ")
    assert "at most 65536" in lines[0]


# ---- stored fields are capped ----------------------------------------------------------------
def test_stored_fields_are_capped_with_warnings(tmp_path: Path) -> None:
    root = tmp_path / "native"
    long_text = "word " * 2400  # 12,000 characters: under the scalar limit, over the field cap
    path = skill_md(root / "big", f"when_to_use: {long_text}\nnotes: {long_text}", name="big")
    text = path.read_text().replace("description: d", f"description: {long_text}")
    path.write_text(text)
    registry, lines = load([root])
    skill = registry.get("big")
    assert len(skill.description) == MAX_TEXT_CHARS
    assert skill.description.endswith("…")
    assert skill.when_to_use is not None and len(skill.when_to_use) == MAX_TEXT_CHARS
    assert skill.extra is not None
    assert skill.extra["notes"] == f"(not kept: 12001 bytes, over the {MAX_FIELD_BYTES}-byte cap)"
    assert len(registry.summary_json(skill)) < 3 * MAX_TEXT_CHARS
    warned = " | ".join(line for line in lines if "warning" in line)
    assert "description is 11999 characters; kept the first 4096" in warned
    assert f"notes is 12001 bytes as JSON, over {MAX_FIELD_BYTES}: not kept" in warned


def test_persona_fields_are_capped_too(tmp_path: Path) -> None:
    long_text = "word " * 2400
    path = persona_md(tmp_path, f"critical_reminder: {long_text}\nnotes: {long_text}")
    persona = load_persona(str(path))
    assert persona.critical_reminder is not None
    assert len(persona.critical_reminder) == MAX_TEXT_CHARS
    assert persona.extra["notes"].startswith("(not kept: ")
    assert any("critical_reminder is" in w for w in persona.warnings)


# ---- pack manifests --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("case", "content", "says"),
    [
        ("deep nesting", "[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
        ("over 1 MiB", '{"name": "' + "x" * (1024 * 1024) + '"}', "larger than"),
        ("not a name", '{"name": {"a": 1}}', "is not a pack name"),
        ("a colon in the name", '{"name": "a:b"}', "is not a pack name"),
        ("not JSON", "name: yaml", "Expecting value"),
    ],
)
def test_an_unusable_plugin_manifest_leaves_the_folder_pack_name(
    tmp_path: Path, case: str, content: str, says: str
) -> None:
    root = tmp_path / "acme__tools"
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = root / ".claude-plugin" / "plugin.json"
    manifest.write_text(content)
    skill_md(root / "skills" / "guide", "", name="release-guide")
    registry, lines = load([root])
    assert registry.resolve("tools:release-guide").name == "release_guide", case
    (line,) = [line for line in lines if "pack manifest" in line]
    assert line.startswith(f"skill loader: pack manifest {manifest}: ")
    assert says in line


def test_a_fifo_named_plugin_json_never_blocks_the_load(tmp_path: Path) -> None:
    root = tmp_path / "acme__tools"
    (root / ".claude-plugin").mkdir(parents=True)
    os.mkfifo(root / ".claude-plugin" / "plugin.json")
    skill_md(root / "guide", "", name="guide")
    registry, _ = load([root])  # a blocking open would hang here
    assert registry.resolve("tools:guide").name == "guide"
