"""skill.json parsing and building (SPEC §2), seen through the loader's log lines (SPEC §3).

Every test writes real skill folders (a skill.json and an executable) under tmp_path and loads
them with ``ongrid_skills.load_registry``; the loader lines are captured with ``log=`` and
compared byte for byte: they are a contract operators grep for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import Settings, SkillClass
from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.skill_json import MAX_MANIFEST_BYTES, parse_manifest, read_manifest

SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n"
MIB = 1024 * 1024
ABSENT = object()

# --- helpers -------------------------------------------------------------------------------


def write_skill(folder: Path, manifest: Any = None, *, raw: bytes | None = None) -> Path:
    """Write folder/skill.json (a dict as JSON, or raw bytes) and an executable folder/run."""
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / "run"
    entry.write_text(SCRIPT)
    entry.chmod(0o755)
    path = folder / "skill.json"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(json.dumps(manifest, indent=2))
    return path


def manifest(name: Any = "x", **fields: Any) -> dict[str, Any]:
    """A valid manifest; a field given as ABSENT is left out."""
    body: dict[str, Any] = {"name": name, "description": "a test skill", "entry": "run"}
    body.update(fields)
    return {k: v for k, v in body.items() if v is not ABSENT}


def load(*roots: Path | str) -> tuple[ongrid_skills.Registry, list[str]]:
    lines: list[str] = []
    registry = ongrid_skills.load_registry(
        external_dirs=[str(r) for r in roots],
        persona_dirs=[],
        settings=Settings.load(environ={"ONGRID_BUNDLED_SKILLS": "0"}),
        log=lines.append,
    )
    return registry, lines


def load_one(tmp_path: Path, body: Any = None, *, raw: bytes | None = None) -> tuple[Any, ...]:
    """Load a root holding one skill folder; return (registry, lines, manifest path, root)."""
    root = tmp_path / "skills"
    path = write_skill(root / "one", body, raw=raw)
    registry, lines = load(root)
    return registry, lines, path, root


def registered(name: str, path: Path) -> str:
    return f'skill loader: registered subprocess skill "{name}" from {path}'


def build_line(name: str, reason: str, path: Path) -> str:
    return f'skill loader: build "{name}": {reason} (in {path})'


def parse_line(path: Path, reason: str) -> str:
    return f"skill loader: parse {path}: {reason}"


# --- parse errors: the file is not a JSON object --------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty file: expected a JSON object"),
        (b"  \n\t\n", "empty file: expected a JSON object"),
        (b"\xff\xfe\x00binary\x00", "not UTF-8: invalid byte 0xff at line 1 column 1"),
        (b'{"name": "x",\n "description": "caf\xe9"}', "not UTF-8: invalid byte 0xe9 at line 2"),
        (b'\xef\xbb\xbf{"name": "x"}', "starts with a UTF-8 byte-order mark"),
        (b"[]", "expected a JSON object at the top level, got array"),
        (b'[{"name": "x"}]', "expected a JSON object at the top level, got array"),
        (b'"skill"', "expected a JSON object at the top level, got string"),
        (b"42", "expected a JSON object at the top level, got number"),
        (b"null", "expected a JSON object at the top level, got null"),
        (b"{} trailing", "Extra data at line 1 column 4"),
    ],
    ids=[
        "empty",
        "blank",
        "binary",
        "latin1",
        "bom",
        "empty-array",
        "array",
        "string",
        "number",
        "null",
        "trailing-garbage",
    ],
)
def test_a_manifest_that_is_not_a_utf8_json_object_is_a_parse_error_and_nothing_registers(
    tmp_path: Path, raw: bytes, reason: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, raw=raw)
    assert len(registry) == 0
    assert len(lines) == 1
    assert lines[0].startswith(parse_line(path, reason))


def test_invalid_json_is_a_parse_error_carrying_the_line_and_column_of_the_mistake(
    tmp_path: Path,
) -> None:
    text = '{\n  "name": "x",\n  "description": "d"\n  "entry": "run"\n}\n'
    registry, lines, path, _ = load_one(tmp_path, raw=text.encode())
    assert len(registry) == 0
    assert lines == [parse_line(path, "Expecting ',' delimiter at line 4 column 3")]


def test_a_raw_newline_inside_a_string_is_located_without_a_doubled_at(tmp_path: Path) -> None:
    text = '{"name": "x",\n"description": "never closed\n}'
    _, lines, path, _ = load_one(tmp_path, raw=text.encode())
    assert lines == [parse_line(path, "Invalid control character at line 2 column 29")]


def test_an_unterminated_string_reports_where_the_string_starts(tmp_path: Path) -> None:
    _, lines, path, _ = load_one(tmp_path, raw=b'{"name": "x')
    assert lines == [parse_line(path, "Unterminated string starting at line 1 column 10")]


def test_the_line_and_column_of_a_non_utf8_byte_count_characters_not_bytes(
    tmp_path: Path,
) -> None:
    raw = '{"description": "déjà vu",\n "x": "'.encode() + b'\xff"}'
    _, lines, path, _ = load_one(tmp_path, raw=raw)
    assert lines == [parse_line(path, "not UTF-8: invalid byte 0xff at line 2 column 8")]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_and_are_a_parse_error(tmp_path: Path, constant: str) -> None:
    text = (
        '{"name": "x", "description": "NaN in a string is fine", "entry": "run",\n'
        ' "schema": {"type": "object", "properties": {"n": {"type": "number", '
        '"maximum": ' + constant + "}}}}\n"
    )
    registry, lines, path, _ = load_one(tmp_path, raw=text.encode())
    assert len(registry) == 0
    col = text.splitlines()[1].index(constant) + 1
    assert lines == [parse_line(path, f"invalid JSON value {constant} at line 2 column {col}")]


def test_json_nested_too_deeply_is_a_parse_error_not_a_crash(tmp_path: Path) -> None:
    raw = b'{"schema": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    registry, lines, path, _ = load_one(tmp_path, raw=raw)
    assert len(registry) == 0
    assert len(lines) == 1
    assert lines[0].startswith(f"skill loader: parse {path}: ")


@pytest.mark.parametrize(
    ("second", "where"),
    [
        ('"class"', '"class" ($.class) at line 5 column 3'),
        ('"\\u0063lass"', '"class" ($.class) at line 5 column 3'),  # the same key, escaped
    ],
)
def test_a_key_given_twice_is_a_parse_error_at_the_second_one(
    tmp_path: Path, second: str, where: str
) -> None:
    text = (
        '{\n  "name": "x",\n  "description": "d",\n  "class": "safe",\n'
        f'  {second}: "dangerous",\n  "entry": "run"\n}}\n'
    )
    registry, lines, path, _ = load_one(tmp_path, raw=text.encode())
    assert len(registry) == 0
    assert lines == [parse_line(path, f"duplicate key {where}")]


def test_a_key_given_twice_deep_in_the_schema_is_a_parse_error_with_its_path(
    tmp_path: Path,
) -> None:
    text = (
        '{"name": "x", "description": "d", "entry": "run", "schema": {"type": "object",\n'
        ' "properties": {"n": {"type": "integer"}, "n": {"type": "string"}},\n'
        ' "required": ["n", "n"]}}'
    )
    registry, lines, path, _ = load_one(tmp_path, raw=text.encode())
    assert len(registry) == 0
    assert lines == [
        parse_line(path, 'duplicate key "n" ($.schema.properties.n) at line 2 column 43')
    ]


def test_parse_manifest_locates_a_duplicate_key_for_validate(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(b'{"a": 1,\n "a": 2}', "/x/skill.json")
    err = info.value
    assert (err.kind, err.line, err.column) == ("parse", 2, 2)


def padded(size: int) -> bytes:
    """A valid manifest padded with trailing blanks to exactly ``size`` bytes."""
    body = json.dumps(manifest("big")).encode()
    return body + b" " * (size - len(body))


def test_a_manifest_of_exactly_one_mib_parses_and_registers(tmp_path: Path) -> None:
    raw = padded(MIB)
    assert len(raw) == MAX_MANIFEST_BYTES == MIB
    registry, lines, path, _ = load_one(tmp_path, raw=raw)
    assert lines == [registered("big", path)]
    assert "big" in registry


def test_a_manifest_of_one_mib_plus_one_byte_is_a_parse_error(tmp_path: Path) -> None:
    registry, lines, path, _ = load_one(tmp_path, raw=padded(MIB + 1))
    assert len(registry) == 0
    assert lines == [parse_line(path, "file is larger than 1048576 bytes")]


def test_a_two_mib_manifest_is_a_parse_error(tmp_path: Path) -> None:
    registry, lines, path, _ = load_one(tmp_path, raw=padded(2 * MIB))
    assert len(registry) == 0
    assert lines == [parse_line(path, "file is larger than 1048576 bytes")]


def test_parse_manifest_raises_a_parse_kind_error_with_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(b'{\n\n   "a": }', "/x/skill.json")
    err = info.value
    assert (err.kind, err.line, err.column, err.path) == ("parse", 3, 9, "/x/skill.json")
    assert err.code == "invalid_manifest"


def test_an_unreadable_manifest_path_is_a_parse_error_not_an_exception(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        read_manifest(str(tmp_path / "missing" / "skill.json"))
    assert info.value.kind == "parse"
    assert info.value.message.startswith("cannot read: ")


@pytest.mark.timeout(20)
def test_a_fifo_named_skill_json_is_a_parse_error_and_never_blocks_the_loader(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    (root / "fifo").mkdir(parents=True)
    fifo = root / "fifo" / "skill.json"
    os.mkfifo(fifo)
    good = write_skill(root / "good", manifest("good"))
    registry, lines = load(root)
    assert lines == [
        parse_line(fifo, "not a regular file"),
        registered("good", good),
    ]
    assert list(registry.skills) == ["good"]


# --- build errors: a JSON object with bad or missing fields ----------------------------------


@pytest.mark.parametrize(
    ("name", "shown", "reason"),
    [
        (ABSENT, "", "name is required"),
        (None, "", "name must be a string, got null"),
        (7, "", "name must be a string, got number"),
        (True, "", "name must be a string, got boolean"),
        (["x"], "", "name must be a string, got array"),
        ({"x": 1}, "", "name must be a string, got object"),
        ("", "", 'name "" must match [a-z0-9_]+'),
        ("Bad-Name", "Bad-Name", 'name "Bad-Name" must match [a-z0-9_]+'),
        ("UPPER", "UPPER", 'name "UPPER" must match [a-z0-9_]+'),
        ("has space", "has space", 'name "has space" must match [a-z0-9_]+'),
        (" padded", " padded", 'name " padded" must match [a-z0-9_]+'),
        ("dash-ed", "dash-ed", 'name "dash-ed" must match [a-z0-9_]+'),
        ("caf\u00e9", "caf\u00e9", 'name "caf\u00e9" must match [a-z0-9_]+'),
        ("a" * 65, "a" * 65, "name is 65 characters, at most 64"),
    ],
    ids=[
        "absent",
        "null",
        "number",
        "boolean",
        "array",
        "object",
        "empty",
        "dash-capital",
        "upper",
        "space",
        "leading-space",
        "dash",
        "non-ascii",
        "65-chars",
    ],
)
def test_a_bad_name_is_a_build_error_quoting_the_name_or_empty_when_not_a_string(
    tmp_path: Path, name: Any, shown: str, reason: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(name))
    assert len(registry) == 0
    assert lines == [build_line(shown, reason, path)]


def test_a_name_of_64_characters_is_the_longest_accepted(tmp_path: Path) -> None:
    name = "a_" * 32
    registry, lines, path, _ = load_one(tmp_path, manifest(name))
    assert lines == [registered(name, path)]
    assert registry.get(name).name == name


def test_a_name_with_digits_and_underscores_only_is_accepted(tmp_path: Path) -> None:
    _registry, lines, path, _ = load_one(tmp_path, manifest("0_9"))
    assert lines == [registered("0_9", path)]


def test_a_name_carrying_a_newline_cannot_forge_a_second_loader_line(tmp_path: Path) -> None:
    evil = 'x\nskill loader: registered subprocess skill "forged" from /etc/passwd'
    registry, lines, _, _ = load_one(tmp_path, manifest(evil))
    assert len(registry) == 0
    assert len(lines) == 1
    assert "\n" not in lines[0]
    assert "\r" not in lines[0]
    assert lines[0].startswith('skill loader: build "x\\nskill loader: ')


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (ABSENT, "description is required"),
        (None, "description is required"),
        ("", "description must be a non-blank string"),
        ("   \n\t", "description must be a non-blank string"),
        (5, "description must be a non-blank string"),
        (["d"], "description must be a non-blank string"),
        ({"en": "d"}, "description must be a non-blank string"),
    ],
    ids=["absent", "null", "empty", "blank", "number", "array", "object"],
)
def test_a_missing_blank_or_non_string_description_is_a_build_error(
    tmp_path: Path, value: Any, reason: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(description=value))
    assert len(registry) == 0
    assert lines == [build_line("x", reason, path)]


def test_the_description_is_kept_trimmed(tmp_path: Path) -> None:
    registry, _, _, _ = load_one(tmp_path, manifest(description="  Frees disk.\n"))
    assert registry.get("x").description == "Frees disk."


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (None, "schema must be a JSON object, got null"),
        ([], "schema must be a JSON object, got array"),
        ("object", "schema must be a JSON object, got string"),
        (True, "schema must be a JSON object, got boolean"),
        (1, "schema must be a JSON object, got number"),
        ({"type": "array"}, 'schema type must be "object", got "array"'),
        ({"type": "string"}, 'schema type must be "object", got "string"'),
        ({"type": ["object", "null"]}, 'schema type must be "object", got ["object", "null"]'),
        (
            {"type": "object", "properties": {"a": {"type": 7}}},
            "schema is not a valid Draft 2020-12 schema at /properties/a/type: ",
        ),
        (
            {"type": "object", "required": "a"},
            "schema is not a valid Draft 2020-12 schema at /required: ",
        ),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
            "schema $schema must be 'https://json-schema.org/draft/2020-12/schema' (or absent)",
        ),
    ],
    ids=[
        "null",
        "array",
        "string",
        "boolean",
        "number",
        "type-array",
        "type-string",
        "type-list",
        "bad-subschema-type",
        "bad-required",
        "other-draft",
    ],
)
def test_a_schema_that_is_not_a_valid_object_schema_is_a_build_error(
    tmp_path: Path, schema: Any, reason: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(schema=schema))
    assert len(registry) == 0
    assert len(lines) == 1
    assert lines[0].startswith(build_line("x", reason, path).rsplit(" (in ", 1)[0])
    assert lines[0].endswith(f" (in {path})")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}},
        {"type": "object", "$ref": "#/$defs/missing"},
        {"type": "object", "$ref": "http://127.0.0.1:9/remote.json"},
    ],
    ids=["bad-regex", "dangling-ref", "remote-ref"],
)
def test_a_schema_that_cannot_be_compiled_is_a_build_error_at_load_not_at_call_time(
    tmp_path: Path, schema: dict[str, Any]
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(schema=schema))
    assert len(registry) == 0
    assert len(lines) == 1
    assert lines[0].startswith('skill loader: build "x": schema cannot be compiled: ')
    assert lines[0].endswith(f" (in {path})")


def test_an_absent_schema_becomes_an_empty_object_schema(tmp_path: Path) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest())
    assert lines == [registered("x", path)]
    assert registry.get("x").schema == {"type": "object", "properties": {}}


def test_skills_without_a_schema_do_not_share_one_mutable_schema(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root / "a", manifest("a"))
    write_skill(root / "b", manifest("b"))
    registry, _ = load(root)
    registry.get("a").schema["properties"]["injected"] = {"type": "string"}
    assert registry.get("b").schema == {"type": "object", "properties": {}}
    fresh, _ = load(root)
    assert fresh.get("a").schema == {"type": "object", "properties": {}}


def test_a_valid_schema_is_kept_as_written_and_validates_args(tmp_path: Path) -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"path": {"type": "string"}, "dry_run": {"type": "boolean"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    registry, _, _, _ = load_one(tmp_path, manifest(schema=schema))
    skill = registry.get("x")
    assert skill.schema == schema
    assert skill.validate({"path": "/tmp"}) == []
    assert [v.pointer for v in skill.validate({"path": 1})] == ["/path"]


def test_a_schema_without_type_is_accepted(tmp_path: Path) -> None:
    schema = {"properties": {"n": {"type": "integer"}}}
    _registry, lines, path, _ = load_one(tmp_path, manifest(schema=schema))
    assert lines == [registered("x", path)]


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (ABSENT, "entry is required"),
        (None, "entry is required"),
        ("", "entry must be a non-empty string"),
        ("   ", "entry must be a non-empty string"),
        (5, "entry must be a non-empty string"),
        (["run"], "entry must be a non-empty string"),
    ],
    ids=["absent", "null", "empty", "blank", "number", "array"],
)
def test_a_missing_or_non_string_entry_is_a_build_error(
    tmp_path: Path, entry: Any, reason: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(entry=entry))
    assert len(registry) == 0
    assert lines == [build_line("x", reason, path)]


def test_an_entry_escaping_by_dot_dot_is_refused_with_the_escape_log_line(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "escape.sh"
    outside.write_text(SCRIPT)
    outside.chmod(0o755)
    registry, lines, path, root = load_one(tmp_path, manifest(entry="../../escape.sh"))
    assert len(registry) == 0
    real = os.path.realpath(outside)
    assert lines == [build_line("x", f"entry {real} escapes allowlist root {root}", path)]


def test_an_absolute_entry_outside_the_root_is_refused_with_the_escape_log_line(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "elsewhere" / "escape.sh"
    outside.parent.mkdir()
    outside.write_text(SCRIPT)
    outside.chmod(0o755)
    registry, lines, path, root = load_one(tmp_path, manifest(entry=str(outside)))
    assert len(registry) == 0
    real = os.path.realpath(outside)
    assert lines == [build_line("x", f"entry {real} escapes allowlist root {root}", path)]


def test_an_entry_symlinked_outside_the_root_is_refused_with_the_escape_log_line(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "escape.sh"
    outside.write_text(SCRIPT)
    outside.chmod(0o755)
    root = tmp_path / "skills"
    path = write_skill(root / "one", manifest(entry="link.sh"))
    (root / "one" / "link.sh").symlink_to(outside)
    registry, lines = load(root)
    assert len(registry) == 0
    real = os.path.realpath(outside)
    assert lines == [build_line("x", f"entry {real} escapes allowlist root {root}", path)]


def test_an_entry_whose_root_prefix_is_a_sibling_folder_still_escapes(tmp_path: Path) -> None:
    """/x/skills-evil/run is not under /x/skills even though the string starts with it."""
    evil = tmp_path / "skills-evil"
    evil.mkdir()
    (evil / "run").write_text(SCRIPT)
    (evil / "run").chmod(0o755)
    registry, lines, path, root = load_one(tmp_path, manifest(entry="../../skills-evil/run"))
    assert len(registry) == 0
    real = os.path.realpath(evil / "run")
    assert lines == [build_line("x", f"entry {real} escapes allowlist root {root}", path)]


def test_an_absolute_entry_inside_the_root_is_allowed(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    shared = root / "bin" / "tool"
    shared.parent.mkdir(parents=True)
    shared.write_text(SCRIPT)
    shared.chmod(0o755)
    path = write_skill(root / "one", manifest(entry=str(shared)))
    registry, lines = load(root)
    assert lines == [registered("x", path)]
    target = registry.get("x").target
    assert target is not None
    assert target.entry == os.path.realpath(shared)


def test_a_dot_dot_entry_that_stays_inside_the_root_is_allowed(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    shared = root / "bin" / "tool"
    shared.parent.mkdir(parents=True)
    shared.write_text(SCRIPT)
    shared.chmod(0o755)
    path = write_skill(root / "one", manifest(entry="../bin/tool"))
    _registry, lines = load(root)
    assert lines == [registered("x", path)]


def test_an_entry_symlinked_to_a_file_inside_the_root_is_canonicalised(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "one", manifest(entry="alias"))
    (root / "one" / "alias").symlink_to("run")
    registry, lines = load(root)
    assert lines == [registered("x", path)]
    target = registry.get("x").target
    assert target is not None
    assert target.entry == os.path.realpath(root / "one" / "run")
    assert target.root == os.path.realpath(root)


def test_an_entry_in_a_subfolder_of_the_skill_is_allowed(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "one", manifest(entry="bin/run"))
    (root / "one" / "bin").mkdir()
    (root / "one" / "bin" / "run").write_text(SCRIPT)
    (root / "one" / "bin" / "run").chmod(0o700)
    _registry, lines = load(root)
    assert lines == [registered("x", path)]


def test_an_entry_that_is_a_directory_is_a_build_error(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "one", manifest(entry="bin"))
    (root / "one" / "bin").mkdir()
    registry, lines = load(root)
    assert len(registry) == 0
    entry = os.path.realpath(root / "one") + "/bin"
    assert lines == [build_line("x", f"entry {entry} is not a regular file", path)]


def test_an_entry_that_is_not_executable_is_a_build_error(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "one", manifest())
    (root / "one" / "run").chmod(0o644)
    registry, lines = load(root)
    assert len(registry) == 0
    entry = os.path.realpath(root / "one") + "/run"
    assert lines == [build_line("x", f"entry {entry} is not executable", path)]


def test_an_entry_in_a_subfolder_that_is_not_executable_is_a_build_error(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "one", manifest(entry="bin/run"))
    (root / "one" / "bin").mkdir()
    (root / "one" / "bin" / "run").write_text(SCRIPT)
    registry, lines = load(root)
    assert len(registry) == 0
    entry = os.path.realpath(root / "one") + "/bin/run"
    assert lines == [build_line("x", f"entry {entry} is not executable", path)]


def test_a_missing_entry_is_a_build_error(tmp_path: Path) -> None:
    registry, lines, path, root = load_one(tmp_path, manifest(entry="nope.sh"))
    assert len(registry) == 0
    entry = os.path.realpath(root / "one") + "/nope.sh"
    assert lines == [build_line("x", f"entry {entry} does not exist", path)]


def test_a_dangling_entry_symlink_is_a_build_error(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "one", manifest(entry="dangling"))
    (root / "one" / "dangling").symlink_to(tmp_path / "gone")
    registry, lines = load(root)
    assert len(registry) == 0
    assert len(lines) == 1
    assert lines[0].startswith('skill loader: build "x": entry ')
    assert lines[0].endswith(f" (in {path})")


@pytest.mark.parametrize(
    ("env_allow", "reason"),
    [
        ("PATH", "env_allow must be an array of names, got string"),
        ({"PATH": 1}, "env_allow must be an array of names, got object"),
        (5, "env_allow must be an array of names, got number"),
        ([1], "env_allow entry 1 must match [A-Za-z_][A-Za-z0-9_]*"),
        ([None], "env_allow entry null must match [A-Za-z_][A-Za-z0-9_]*"),
        ([["PATH"]], 'env_allow entry ["PATH"] must match [A-Za-z_][A-Za-z0-9_]*'),
        (["PATH", ""], 'env_allow entry "" must match [A-Za-z_][A-Za-z0-9_]*'),
        (["1ABC"], 'env_allow entry "1ABC" must match [A-Za-z_][A-Za-z0-9_]*'),
        (["A-B"], 'env_allow entry "A-B" must match [A-Za-z_][A-Za-z0-9_]*'),
        (["PATH=/bin"], 'env_allow entry "PATH=/bin" must match [A-Za-z_][A-Za-z0-9_]*'),
        ([" HOME"], 'env_allow entry " HOME" must match [A-Za-z_][A-Za-z0-9_]*'),
    ],
    ids=[
        "string",
        "object",
        "number",
        "item-number",
        "item-null",
        "item-array",
        "item-empty",
        "leading-digit",
        "dash",
        "assignment",
        "space",
    ],
)
def test_a_bad_env_allow_or_item_is_a_build_error(
    tmp_path: Path, env_allow: Any, reason: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(env_allow=env_allow))
    assert len(registry) == 0
    assert lines == [build_line("x", reason, path)]


@pytest.mark.parametrize(
    ("env_allow", "kept"),
    [
        (ABSENT, ()),
        ([], ()),
        (["PATH", "HOME", "_private", "lower_case9"], ("PATH", "HOME", "_private", "lower_case9")),
        (["PATH", "PATH", "HOME"], ("PATH", "HOME")),
    ],
    ids=["absent", "empty", "names", "duplicates"],
)
def test_env_allow_names_are_kept_in_order_without_duplicates(
    tmp_path: Path, env_allow: Any, kept: tuple[str, ...]
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(env_allow=env_allow))
    assert lines == [registered("x", path)]
    target = registry.get("x").target
    assert target is not None
    assert target.env_allow == kept


@pytest.mark.parametrize(
    ("timeout", "reason"),
    [
        (True, "timeout_seconds must be an integer, got true"),
        (False, "timeout_seconds must be an integer, got false"),
        (1.5, "timeout_seconds must be an integer, got 1.5"),
        (5.0, "timeout_seconds must be an integer, got 5.0"),
        ("5", 'timeout_seconds must be an integer, got "5"'),
        ([5], "timeout_seconds must be an integer, got [5]"),
        (-1, "timeout_seconds must be between 0 and 86400"),
        (86401, "timeout_seconds must be between 0 and 86400"),
        (10**30, "timeout_seconds must be between 0 and 86400"),
    ],
    ids=["true", "false", "fraction", "float", "string", "array", "negative", "86401", "huge"],
)
def test_a_non_integer_negative_or_too_long_timeout_is_a_build_error(
    tmp_path: Path, timeout: Any, reason: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(timeout_seconds=timeout))
    assert len(registry) == 0
    assert lines == [build_line("x", reason, path)]


@pytest.mark.parametrize(
    ("timeout", "effective"),
    [(ABSENT, 30), (0, 30), (1, 1), (60, 60), (86400, 86400)],
    ids=["absent", "zero", "one", "sixty", "one-day"],
)
def test_an_absent_or_zero_timeout_means_thirty_seconds(
    tmp_path: Path, timeout: Any, effective: int
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(timeout_seconds=timeout))
    assert lines == [registered("x", path)]
    assert registry.get("x").timeout_seconds == effective


@pytest.mark.parametrize(
    ("value", "shown"),
    [("SAFE", '"SAFE"'), ("read", '"read"'), ("", '""'), (1, "1"), (None, "null")],
    ids=["upper", "alias", "empty", "number", "null"],
)
def test_a_class_outside_safe_mutating_dangerous_is_a_build_error(
    tmp_path: Path, value: Any, shown: str
) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(**{"class": value}))
    assert len(registry) == 0
    reason = f"class must be one of safe, mutating, dangerous, got {shown}"
    assert lines == [build_line("x", reason, path)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (ABSENT, SkillClass.SAFE),
        ("safe", SkillClass.SAFE),
        ("mutating", SkillClass.MUTATING),
        ("dangerous", SkillClass.DANGEROUS),
    ],
    ids=["absent", "safe", "mutating", "dangerous"],
)
def test_the_class_defaults_to_safe(tmp_path: Path, value: Any, expected: SkillClass) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(**{"class": value}))
    assert lines == [registered("x", path)]
    assert registry.get("x").skill_class is expected


@pytest.mark.parametrize("value", [5, "", "   ", ["ops"], None], ids=str)
def test_a_non_string_or_blank_category_is_a_build_error(tmp_path: Path, value: Any) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(category=value))
    assert len(registry) == 0
    assert lines == [build_line("x", "category must be a non-blank string", path)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(ABSENT, "external"), ("ops", "ops"), (" Network Tools ", "Network Tools")],
    ids=["absent", "ops", "free-form"],
)
def test_the_category_defaults_to_external(tmp_path: Path, value: Any, expected: str) -> None:
    registry, lines, path, _ = load_one(tmp_path, manifest(category=value))
    assert lines == [registered("x", path)]
    assert registry.get("x").category == expected


def test_unknown_fields_are_ignored_by_the_loader(tmp_path: Path) -> None:
    body = manifest(timeout=5, version="1.0", x_vendor={"a": [1, 2]})
    registry, lines, path, _ = load_one(tmp_path, body)
    assert lines == [registered("x", path)]
    assert registry.get("x").timeout_seconds == 30


def test_the_example_manifest_of_the_spec_builds_every_field(tmp_path: Path) -> None:
    body = {
        "name": "disk_cleaner",
        "description": "Free up disk by clearing stale build caches and journals.",
        "schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Root path to clean."},
                "dry_run": {"type": "boolean", "default": True},
            },
            "required": ["path"],
        },
        "entry": "run",
        "env_allow": ["PATH", "HOME"],
        "timeout_seconds": 60,
        "class": "mutating",
        "category": "ops",
    }
    root = tmp_path / "skills"
    path = write_skill(root / "disk-cleaner", body)
    registry, lines = load(root)
    assert lines == [registered("disk_cleaner", path)]
    skill = registry.get("disk_cleaner")
    assert skill.description == body["description"]
    assert skill.schema == body["schema"]
    assert skill.timeout_seconds == 60
    assert skill.skill_class is SkillClass.MUTATING
    assert skill.category == "ops"
    assert skill.kind == "subprocess"
    assert skill.source == "external"
    assert skill.origin == str(path)
    target = skill.target
    assert target is not None
    assert target.env_allow == ("PATH", "HOME")
    assert target.folder == os.path.realpath(root / "disk-cleaner")
    assert target.entry == os.path.realpath(root / "disk-cleaner" / "run")
