"""``ongrid-skills validate``: ``path:line:col: error|warning: message``, exit 1 on any error."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.skills.lint import Finding, validate_paths
from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS

SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n"
FINDING_RE = re.compile(r"(?P<path>/.+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): .+")


def write_skill(folder: Path, body: dict[str, Any] | str) -> Path:
    """Write folder/skill.json (a dict pretty-printed, one field per line) and folder/run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run").write_text(SCRIPT)
    (folder / "run").chmod(0o755)
    path = folder / "skill.json"
    path.write_text(body if isinstance(body, str) else json.dumps(body, indent=2) + "\n")
    return path


def good(name: str = "x", **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": "a test skill", "entry": "run", **fields}


def position(path: Path, needle: str) -> tuple[int, int]:
    """1-based line and column of the first occurrence of ``needle`` in the file."""
    text = path.read_text()
    offset = text.index(needle)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_DATA_DIR"] = str(cwd / ".ongrid")
    return subprocess.run(
        [str(CLI), "validate", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )


# --- findings ------------------------------------------------------------------------------


def test_a_clean_tree_has_no_findings(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills" / "a", good("a"))
    write_skill(tmp_path / "skills" / "b", good("b", timeout_seconds=5))
    assert validate_paths([str(tmp_path / "skills")]) == []


def test_a_finding_is_formatted_path_line_column_severity_message() -> None:
    finding = Finding("/a/skill.json", 3, 5, "warning", "unknown field 'x' is ignored")
    assert finding.format() == "/a/skill.json:3:5: warning: unknown field 'x' is ignored"


def test_an_unknown_field_is_a_warning_with_a_typo_hint_at_its_position(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "skills" / "a", good(timeout=60))
    findings = validate_paths([str(tmp_path / "skills")])
    line, col = position(path, '"timeout"')
    assert [f.format() for f in findings] == [
        f"{path}:{line}:{col}: warning: unknown field 'timeout' is ignored "
        "(did you mean 'timeout_seconds'?)"
    ]


@pytest.mark.parametrize(
    ("field", "hint"),
    [
        ("descripton", "description"),
        ("env_alow", "env_allow"),
        ("envallow", "env_allow"),
        ("clas", "class"),
        ("categroy", "category"),
        ("shcema", "schema"),
    ],
)
def test_close_misspellings_of_known_fields_get_a_did_you_mean_hint(
    tmp_path: Path, field: str, hint: str
) -> None:
    write_skill(tmp_path / "skills" / "a", good(**{field: 1}))
    [finding] = validate_paths([str(tmp_path / "skills")])
    assert finding.severity == "warning"
    assert finding.message == f"unknown field {field!r} is ignored (did you mean {hint!r}?)"


def test_an_unrelated_unknown_field_is_a_warning_without_a_hint(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills" / "a", good(x_vendor_metadata={"k": 1}))
    [finding] = validate_paths([str(tmp_path / "skills")])
    assert finding.severity == "warning"
    assert finding.message == "unknown field 'x_vendor_metadata' is ignored"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout_seconds", -1, "timeout_seconds must be between 0 and 86400"),
        ("class", "admin", 'class must be one of safe, mutating, dangerous, got "admin"'),
        ("category", "", "category must be a non-blank string"),
        ("env_allow", ["A-B"], 'env_allow entry "A-B" must match [A-Za-z_][A-Za-z0-9_]*'),
        ("schema", {"type": "array"}, 'schema type must be "object", got "array"'),
        ("description", " ", "description must be a non-blank string"),
        ("name", "Bad-Name", 'name "Bad-Name" must match [a-z0-9_]+'),
    ],
    ids=["timeout", "class", "category", "env_allow", "schema", "description", "name"],
)
def test_a_build_error_points_at_the_line_of_the_offending_field(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    body = good()
    body["padding"] = None  # fields land on different lines
    body[field] = value
    path = write_skill(tmp_path / "skills" / "a", body)
    findings = [f for f in validate_paths([str(tmp_path / "skills")]) if f.severity == "error"]
    line, col = position(path, f'"{field}":')
    assert [f.format() for f in findings] == [f"{path}:{line}:{col}: error: {message}"]
    assert line > 1


def test_an_error_points_at_the_top_level_field_not_a_nested_key_of_the_same_name(
    tmp_path: Path,
) -> None:
    text = (
        "{\n"
        '  "schema": {\n'
        '    "type": "object",\n'
        '    "properties": {\n'
        '      "timeout_seconds": {"type": "integer"},\n'
        '      "category": {"type": "string"}\n'
        "    }\n"
        "  },\n"
        '  "name": "x",\n'
        '  "description": "d",\n'
        '  "entry": "run",\n'
        '  "timeout_seconds": "5",\n'
        '  "catgory": "typo"\n'
        "}\n"
    )
    path = write_skill(tmp_path / "skills" / "a", text)
    findings = validate_paths([str(tmp_path / "skills")])
    assert [f.format() for f in findings] == [
        f"{path}:13:3: warning: unknown field 'catgory' is ignored (did you mean 'category'?)",
        f'{path}:12:3: error: timeout_seconds must be an integer, got "5"',
    ]


def test_a_missing_field_is_reported_at_line_one(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "skills" / "a", {"name": "x", "entry": "run"})
    assert [f.format() for f in validate_paths([str(path.parent.parent)])] == [
        f"{path}:1:1: error: description is required"
    ]


def test_a_parse_error_is_reported_at_the_line_and_column_of_the_mistake(tmp_path: Path) -> None:
    text = '{\n  "name": "x",\n  "description": "d"\n  "entry": "run"\n}\n'
    path = write_skill(tmp_path / "skills" / "a", text)
    assert [f.format() for f in validate_paths([str(tmp_path / "skills")])] == [
        f"{path}:4:3: error: Expecting ',' delimiter at line 4 column 3"
    ]


def test_a_key_given_twice_is_an_error_at_the_second_one(tmp_path: Path) -> None:
    text = '{\n  "name": "x",\n  "description": "d",\n  "entry": "run",\n  "name": "y"\n}\n'
    path = write_skill(tmp_path / "skills" / "a", text)
    assert [f.format() for f in validate_paths([str(tmp_path / "skills")])] == [
        f'{path}:5:3: error: duplicate key "name" ($.name) at line 5 column 3'
    ]


def test_a_name_used_twice_in_the_checked_dirs_is_a_warning_on_the_later_one(
    tmp_path: Path,
) -> None:
    first = write_skill(tmp_path / "skills" / "a", good("dup"))
    later = write_skill(tmp_path / "skills" / "b", good("dup"))
    findings = validate_paths([str(tmp_path / "skills")])
    line, col = position(later, '"name"')
    assert [f.format() for f in findings] == [
        f'{later}:{line}:{col}: warning: name "dup" is already used by {first}; '
        "the loader keeps the first one and skips this one"
    ]


def test_an_entry_escaping_the_dir_given_is_an_error(tmp_path: Path) -> None:
    outside = tmp_path / "escape.sh"
    outside.write_text(SCRIPT)
    outside.chmod(0o755)
    root = tmp_path / "skills"
    path = write_skill(root / "a", good(entry="../../escape.sh"))
    [finding] = validate_paths([str(root)])
    assert finding.severity == "error"
    assert finding.path == str(path)
    real = os.path.realpath(outside)
    assert finding.message == f"entry {real} escapes allowlist root {root}"


def test_a_manifest_symlinked_outside_the_dir_given_is_an_error(tmp_path: Path) -> None:
    elsewhere = write_skill(tmp_path / "elsewhere", good())
    root = tmp_path / "skills"
    (root / "a").mkdir(parents=True)
    (root / "a" / "skill.json").symlink_to(elsewhere)
    [finding] = validate_paths([str(root)])
    assert finding.severity == "error"
    assert "escapes allowlist root" in finding.message


def test_a_single_manifest_file_is_checked_with_its_folder_as_root(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "a", good(timeout=1))
    [finding] = validate_paths([str(path)])
    assert finding.path == str(path)
    assert finding.severity == "warning"


def test_a_path_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert [f.format() for f in validate_paths([str(missing)])] == [
        f"{missing}:1:1: error: no such file or directory"
    ]


def test_the_bundled_examples_validate_clean() -> None:
    assert EXAMPLE_SKILLS.is_dir(), EXAMPLE_SKILLS
    assert validate_paths([str(EXAMPLE_SKILLS)]) == []


# --- the command ---------------------------------------------------------------------------


def test_the_cli_exits_1_on_any_error_and_prints_findings_on_stdout(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills" / "a", good(timeout=1))
    write_skill(tmp_path / "skills" / "b", good("Bad"))
    proc = run_cli(str(tmp_path / "skills"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    assert all(FINDING_RE.fullmatch(line) for line in lines), lines
    assert [FINDING_RE.fullmatch(line)["sev"] for line in lines] == ["warning", "error"]  # type: ignore[index]
    assert "1 error(s), 1 warning(s)" in proc.stderr


def test_the_cli_exits_0_when_there_are_only_warnings(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "skills" / "a", good(timeout=1))
    proc = run_cli(str(tmp_path / "skills"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line, col = position(path, '"timeout"')
    assert proc.stdout == (
        f"{path}:{line}:{col}: warning: unknown field 'timeout' is ignored "
        "(did you mean 'timeout_seconds'?)\n"
    )


def test_the_cli_exits_1_on_a_parse_error(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "skills" / "a", "[]")
    proc = run_cli(str(path), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == (
        f"{path}:1:1: error: expected a JSON object at the top level, got array\n"
    )


def test_the_cli_validates_the_bundled_examples_clean(tmp_path: Path) -> None:
    proc = run_cli(str(EXAMPLE_SKILLS), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert "0 error(s), 0 warning(s)" in proc.stderr


def test_the_cli_takes_a_relative_path_and_reports_absolute_paths(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "skills" / "a", good("Bad"))
    proc = run_cli("skills", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith(f"{path}:")


def test_an_error_on_a_key_written_with_json_escapes_is_still_located(tmp_path: Path) -> None:
    text = '{"name": "x", "description": "d", "entry": "run",\n "timeout\\u005fseconds": -5}\n'
    path = write_skill(tmp_path / "skills" / "a", text)
    assert [f.format() for f in validate_paths([str(tmp_path / "skills")])] == [
        f"{path}:2:2: error: timeout_seconds must be between 0 and 86400"
    ]


# ---- SKILL.md files, linted like manifests and personas ----------------------------------------
def write_raw_skill_md(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_a_clean_skill_md_has_no_findings(tmp_path: Path) -> None:
    write_raw_skill_md(tmp_path, "ok", "---\nname: notes\ndescription: Team notes.\n---\nBody\n")
    assert validate_paths([str(tmp_path)]) == []


def test_a_missing_description_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = write_raw_skill_md(tmp_path, "bad", "---\nname: notes\nversion: 1\n---\n")
    findings = validate_paths([str(tmp_path)])
    assert [(f.path, f.severity) for f in findings] == [(str(path), "error")]
    assert "description" in findings[0].message


def test_an_unclosed_fence_is_an_error_with_its_position(tmp_path: Path) -> None:
    write_raw_skill_md(tmp_path, "open", "\n---\nname: x\ndescription: d\n")
    (finding,) = validate_paths([str(tmp_path)])
    assert finding.severity == "error"
    assert finding.line == 2
    assert "not closed" in finding.message


def test_normalised_names_unknown_keys_and_unmet_requirements_are_warnings(
    tmp_path: Path,
) -> None:
    text = (
        "---\nname: pdf-helper\ndescription: d\nlicense: MIT\n"
        "metadata:\n  requires:\n    bins: [no-such-binary-here-xyz]\n---\n"
    )
    write_raw_skill_md(tmp_path, "pdf", text)
    findings = validate_paths([str(tmp_path)])
    assert {f.severity for f in findings} == {"warning"}
    messages = " | ".join(f.message for f in findings)
    assert 'normalised to "pdf_helper"' in messages
    assert "license" in messages
    assert "no-such-binary-here-xyz" in messages
    assert next(f for f in findings if "license" in f.message).line == 4
