"""Credential slots in skill.json and SKILL.md: loaded, shown, hashed, and refused when wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.skills.credential_slots import SlotError, fill, parse_slots
from ongrid_skills.skills.lint import validate_paths
from tests.support.skills import load, write_exec, write_skill, write_skill_md

CLOUD: dict[str, Any] = {
    "slot": "cloud",
    "label": "Cloud account",
    "fields": ["secret_id", "secret_key"],
    "inject": {
        "env": {"CLOUD_ID": "{{secret_id}}", "CLOUD_KEY": "{{ secret_key }}"},
        "files": [{"path": "cloud/key", "content": "{{secret_key}}\n", "mode": "0400"}],
    },
}


def test_a_skill_json_with_a_slot_shows_it_in_its_summary(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "cloud_check", credentials=[CLOUD])
    registry, _ = load(external=[tmp_path / "skills"])
    slots = registry.get("cloud_check").summary()["credentials"]
    assert slots == [
        {
            "slot": "cloud",
            "label": "Cloud account",
            "fields": ["secret_id", "secret_key"],
            "inject": {
                "env": {"CLOUD_ID": "{{secret_id}}", "CLOUD_KEY": "{{ secret_key }}"},
                "files": [{"path": "cloud/key", "content": "{{secret_key}}\n", "mode": "0400"}],
            },
        }
    ]


def test_a_slot_is_part_of_the_definition_hash(tmp_path: Path) -> None:
    write_skill(tmp_path / "a", "same", credentials=[CLOUD])
    write_skill(tmp_path / "b", "same")
    with_slot, _ = load(external=[tmp_path / "a"])
    without, _ = load(external=[tmp_path / "b"])
    assert with_slot.get("same").load_hash != without.get("same").load_hash


def test_the_slots_of_a_skill_md_reach_its_exec_tools(tmp_path: Path) -> None:
    folder = tmp_path / "native" / "cloud"
    write_exec(folder, "bin/run")
    write_skill_md(
        tmp_path / "native",
        "cloud",
        {
            "name": "cloud",
            "description": "Cloud tools.",
            "metadata": {"requires": {"credentials": [CLOUD]}},
            "tools": [{"name": "cloud_list", "impl": "exec:bin/run"}],
        },
    )
    registry, lines = load(native=[tmp_path / "native"])
    assert [s.slot for s in registry.get("cloud_list").credentials] == ["cloud"], lines


def test_a_builtin_tool_cannot_take_a_credential(tmp_path: Path) -> None:
    write_skill_md(
        tmp_path / "native",
        "probe",
        {
            "name": "probe",
            "description": "Probe.",
            "metadata": {"requires": {"credentials": [CLOUD]}},
            "tools": [{"name": "probe_it", "impl": "builtin:net.probe_tcp"}],
        },
    )
    registry, lines = load(native=[tmp_path / "native"])
    assert "probe_it" not in registry
    assert any("needs an exec: tool" in line for line in lines), lines


def slot(**changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(CLOUD)), **changes}


BAD: dict[str, tuple[Any, str]] = {
    "not_a_list": ({"slot": "x"}, "must be an array of slots"),
    "twice": ([CLOUD, CLOUD], "slot 'cloud' is declared twice"),
    "unknown_field_in_template": (
        [slot(inject={"env": {"TOKEN": "{{token}}"}})],
        "names unknown field 'token' in its template",
    ),
    "template_naming_nothing": ([slot(inject={"env": {"TOKEN": "fixed"}})], "names no field"),
    "env_clashes_with_env_allow": (
        [slot(inject={"env": {"HOME": "{{secret_id}}"}})],
        "env HOME is also in env_allow",
    ),
    "reserved_env": ([slot(inject={"env": {"PATH": "{{secret_id}}"}})], "set by the runner"),
    "bad_mode": (
        [slot(inject={"files": [{"path": "k", "content": "{{secret_id}}", "mode": "0644"}]})],
        "mode 0644 is not allowed",
    ),
    "mode_not_octal": (
        [slot(inject={"files": [{"path": "k", "content": "{{secret_id}}", "mode": 384}]})],
        "mode must be an octal string",
    ),
    "file_escaping": (
        [slot(inject={"files": [{"path": "../k", "content": "{{secret_id}}"}]})],
        "path must be a relative path",
    ),
    "no_injection": ([slot(inject={})], "inject must set env or files"),
    "unknown_key": ([slot(secret="x")], "unknown key 'secret'"),
    "bad_slot_name": ([slot(slot="Cloud Account")], "slot must match"),
    "field_twice": ([slot(fields=["a", "a"])], "a field is named twice"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_slot_is_refused_with_what_is_wrong(case: str) -> None:
    value, message = BAD[case]
    with pytest.raises(SlotError, match=message.replace("(", r"\(")):
        parse_slots(value, env_allow=("HOME",))


def test_a_bad_slot_is_a_validate_error_at_the_credentials_field(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "bad"
    write_skill(tmp_path / "skills", "bad", credentials=[slot(inject={"env": {"T": "{{nope}}"}})])
    text = (folder / "skill.json").read_text()
    findings = validate_paths([str(tmp_path / "skills")])
    assert len(findings) == 1
    finding = findings[0]
    assert finding.severity == "error"
    assert "unknown field 'nope'" in finding.message
    offset = text.index('"credentials"')
    assert (finding.line, finding.column) == (1, offset + 1)


def test_fill_puts_each_value_in_its_place() -> None:
    assert fill("{{a}}:{{ b }}/{{a}}", {"a": "x", "b": "y"}) == "x:y/x"
