"""Lists and `show` as a person sees them at a terminal (tables with headers, class badges in
colour and in words) and as a script reads them from a pipe (aligned columns, never an escape,
`-o json` byte for byte `--json`, `-o yaml` the same data)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ongrid_skills.doors.cli.output.listings import approval_event
from tests.support.skills import MakeSkill
from tests.support.terminal import COLOUR, in_terminal, piped

OK = "#!/bin/sh\ncat >/dev/null\necho '{}'\n"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture
def three(make_skill: MakeSkill, skills_root: Path) -> dict[str, str]:
    make_skill("looker", OK, category="diag", description="Looks. " * 30)
    make_skill("fixer", OK, category="ops", schema=SCHEMA, **{"class": "mutating"})
    make_skill("wiper", OK, category="ops", **{"class": "dangerous"})
    return {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}


def test_list_on_a_terminal_is_a_table_with_headers_and_coloured_badges(
    three: dict[str, str],
) -> None:
    screen = in_terminal("-q", "list", env=three)
    assert screen.status == 0, screen.text
    header, rule, *rows = screen.text.splitlines()
    assert header.split() == ["NAME", "CLASS", "CATEGORY", "DESCRIPTION"]
    assert set(rule.strip()) == {"─"}
    assert [row.split()[:3] for row in rows] == [
        ["fixer", "mutating", "ops"],
        ["looker", "safe", "diag"],
        ["wiper", "dangerous", "ops"],
    ]
    assert all(len(line) <= 100 for line in screen.text.splitlines())
    assert rows[1].endswith("…")  # the long description gives way, the other columns do not
    for word in ("safe", "mutating", "dangerous"):
        assert re.search(rf"\x1b\[[0-9;]*m{word}", screen.raw), word


def test_no_color_keeps_the_table_and_the_words_without_any_style(three: dict[str, str]) -> None:
    screen = in_terminal("-q", "list", env={**three, "NO_COLOR": "1"})
    assert screen.status == 0
    assert screen.text.splitlines()[0].split() == ["NAME", "CLASS", "CATEGORY", "DESCRIPTION"]
    assert "dangerous" in screen.text
    assert not COLOUR.search(screen.raw)
    assert "\x1b[" not in screen.raw


def test_list_in_a_pipe_is_aligned_columns_under_a_header_without_escapes(
    three: dict[str, str],
) -> None:
    done = piped("-q", "list", env={**three, "FORCE_COLOR": "1"})
    assert done.returncode == 0
    assert b"\x1b" not in done.stdout
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "NAME    CLASS      CATEGORY  DESCRIPTION"
    assert lines[1].startswith("fixer   mutating   ops       fixer test skill")
    assert lines[3].startswith("wiper   dangerous  ops       ")
    assert len(lines[2]) == len("looker  safe       diag      ") + 80  # cut as before, not wrapped


def test_output_json_is_byte_for_byte_the_json_flag(three: dict[str, str]) -> None:
    flag = piped("-q", "list", "--json", env=three)
    option = piped("-q", "list", "-o", "json", env=three)
    both = piped("-q", "list", "--json", "--output", "json", env=three)
    assert flag.returncode == option.returncode == both.returncode == 0
    assert flag.stdout == option.stdout == both.stdout
    body = json.loads(flag.stdout)
    assert [i["name"] for i in body["items"]] == ["fixer", "looker", "wiper"]
    shown = piped("-q", "show", "fixer", "--json", env=three)
    assert shown.stdout == piped("-q", "show", "fixer", "-o", "json", env=three).stdout
    assert json.loads(shown.stdout)["schema"] == SCHEMA


def test_output_yaml_is_the_same_data(three: dict[str, str]) -> None:
    as_json = json.loads(piped("-q", "list", "--json", env=three).stdout)
    as_yaml = piped("-q", "list", "-o", "yaml", env=three)
    assert as_yaml.returncode == 0
    assert yaml.safe_load(as_yaml.stdout) == as_json
    one = piped("-q", "show", "fixer", "-o", "yaml", env=three)
    assert yaml.safe_load(one.stdout) == json.loads(
        piped("-q", "show", "fixer", "--json", env=three).stdout
    )


def test_json_and_another_output_disagreeing_is_a_usage_error(three: dict[str, str]) -> None:
    done = piped("-q", "list", "--json", "-o", "yaml", env=three)
    assert done.returncode == 2
    assert done.stdout == b""
    assert b"--json and --output yaml disagree" in done.stderr
    bad = piped("-q", "list", "-o", "xml", env=three)
    assert bad.returncode == 2


def test_an_empty_list_says_so_on_stderr(three: dict[str, str], tmp_path: Path) -> None:
    filtered = piped("-q", "list", "--category", "nothing-here", env=three)
    assert filtered.returncode == 0
    assert filtered.stdout == b""
    assert filtered.stderr == b"no skills match\n"
    empty_root = tmp_path / "empty"
    empty_root.mkdir()
    nothing = piped("-q", "list", env={"ONGRID_SKILLS_EXTERNAL_DIRS": str(empty_root)})
    assert nothing.stdout == b""
    assert b"no skills found" in nothing.stderr
    as_json = piped("-q", "list", "--category", "nothing-here", "--json", env=three)
    assert json.loads(as_json.stdout) == {"items": [], "total": 0}


def test_show_on_a_terminal_is_a_key_value_view_and_the_schema(three: dict[str, str]) -> None:
    screen = in_terminal("-q", "show", "fixer", env=three)
    assert screen.status == 0, screen.text
    lines = [line.rstrip() for line in screen.text.splitlines()]
    assert lines[0].split() == ["name", "fixer"]
    assert ["class", "mutating"] in [line.split() for line in lines]
    assert re.search(r"\x1b\[[0-9;]*mmutating", screen.raw)
    schema_at = lines.index("schema")
    assert json.loads("\n".join(lines[schema_at + 1 :])) == SCHEMA
    assert '  "required": [' in lines  # pretty-printed, two spaces


def test_show_in_a_pipe_keeps_its_plain_lines(three: dict[str, str]) -> None:
    done = piped("-q", "show", "fixer", env=three)
    text = done.stdout.decode()
    assert "class:           mutating\n" in text
    assert "schema:\n" + json.dumps(SCHEMA, indent=2) + "\n" in text
    assert b"\x1b" not in done.stdout


def test_a_manifests_control_characters_never_reach_the_screen(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("sneaky", OK, description="calm \x1b[2J\x1b]0;owned\x07 words")
    env = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}
    for args in (("list",), ("show", "sneaky")):
        done = piped("-q", *args, env=env)
        assert done.returncode == 0
        assert b"\x1b" not in done.stdout
        assert b"calm \\x1b[2J\\x1b]0;owned\\x07 words" in done.stdout
        screen = in_terminal("-q", *args, env=env)
        assert "\x1b[2J" not in screen.raw and "\x1b]0;owned" not in screen.raw
        assert "calm \\x1b[2J" in screen.text


def test_an_install_skill_request_is_watched_with_its_pack_signer_and_skills() -> None:
    pack = {
        "id": "ops-basics",
        "version": "1.0.0",
        "signer": {"key": "SHA256:abc", "trust": "trusted"},
        "skills": [{"name": "host_info", "class": "safe"}],
    }
    request = {
        "id": "a1",
        "skill": "install_skill",
        "class": "dangerous",
        "signatures_collected": 0,
        "signatures_required": 2,
        "requested_by": "agent:r1",
        "args": {"source": "ops-basics", "digest": "sha256:" + "c" * 64},
        "preview": {"pack": pack},
    }

    line = "".join(str(part) for part in approval_event("requested", request))

    assert line.endswith(
        "  pack=ops-basics@1.0.0 signer=SHA256:abc (trusted) skills: host_info (safe)"
    )


def test_a_finished_preview_is_watched_with_what_it_said_or_why_it_failed() -> None:
    request = {
        "id": "a2",
        "skill": "disk_cleaner",
        "class": "mutating",
        "signatures_collected": 0,
        "signatures_required": 1,
        "requested_by": "olga",
        "args": {"path": "/var/cache/build"},
        "preview": {"run": {"status": "done", "result": '{"files_deleted": 17}'}},
    }
    line = "".join(str(part) for part in approval_event("previewed", request))
    assert line.endswith('  preview: {"files_deleted": 17}')

    failed = {"status": "failed", "error": {"code": "timed_out", "message": "timed out after 5 s"}}
    request["preview"] = {"run": failed}
    line = "".join(str(part) for part in approval_event("previewed", request))
    assert line.endswith("  preview failed (timed_out): timed out after 5 s")
