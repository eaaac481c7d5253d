"""Persona files: frontmatter, required fields, modes, whitelist and blacklist patterns."""

from __future__ import annotations

from pathlib import Path

import pytest

import ongrid_skills
from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.persona import load_persona, pattern_matches
from ongrid_skills.types import PermissionMode

RESPONDER = """---
name: ops_responder
description: First responder for service incidents.
when_to_use: When a service on a host is down or flapping.
permission_mode: mutating-with-confirm
tools: [probe_tcp, tail_file, restart_service, disk_*]
disallowed_tools: ["*_delete", "cloud_*"]
max_turns: 12
model: gpt-4.1-mini
critical_reminder: Never restart databases without a backup.
team: sre
---
You are the first responder.
"""


def write(tmp_path: Path, text: str, name: str = "p.md") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_complete_persona_file_loads_every_field(tmp_path: Path) -> None:
    persona = load_persona(write(tmp_path, RESPONDER))
    assert persona.name == "ops_responder"
    assert persona.permission_mode is PermissionMode.MUTATING_WITH_CONFIRM
    assert persona.tools == ("probe_tcp", "tail_file", "restart_service", "disk_*")
    assert persona.max_turns == 12
    assert persona.model == "gpt-4.1-mini"
    assert persona.critical_reminder == "Never restart databases without a backup."
    assert persona.prompt == "You are the first responder.\n"
    assert persona.extra == {"team": "sre"}
    assert any("team" in w for w in persona.warnings)


def test_the_blacklist_wins_over_the_whitelist(tmp_path: Path) -> None:
    persona = load_persona(write(tmp_path, RESPONDER))
    assert persona.permits_tool("probe_tcp")
    assert persona.permits_tool("disk_usage")
    assert not persona.permits_tool("disk_delete")
    assert not persona.permits_tool("list_processes")


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("probe_*", "probe_tcp", True),
        ("probe_*", "tcp_probe", False),
        ("*_delete", "disk_delete", True),
        ("*_delete", "delete_disk", False),
        ("exact", "exact", True),
        ("exact", "exactly", False),
        ("*", "anything", True),
    ],
)
def test_patterns_match_prefix_star_and_star_suffix(
    pattern: str, name: str, expected: bool
) -> None:
    assert pattern_matches(pattern, name) is expected


def test_the_permission_mode_defaults_to_read_only(tmp_path: Path) -> None:
    text = "---\nname: watcher\ndescription: d\nwhen_to_use: w\n---\nbody\n"
    assert load_persona(write(tmp_path, text)).permission_mode is PermissionMode.READ_ONLY


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "no frontmatter"),
        ("---\nname: x\ndescription: d\n", "not closed"),
        ("---\ndescription: d\nwhen_to_use: w\n---\n", "name is required"),
        ("---\nname: x\nwhen_to_use: w\n---\n", "description is required"),
        ("---\nname: x\ndescription: d\n---\n", "when_to_use is required"),
        ("---\nname: x\ndescription: d\nwhen_to_use: w\npermission_mode: root\n---\n", "one of"),
        ("---\nname: x\ndescription: d\nwhen_to_use: w\ntools: probe\n---\n", "list"),
        ("---\nname: x\ndescription: d\nwhen_to_use: w\ntools: [a*b]\n---\n", "prefix*"),
        ("---\nname: x\ndescription: d\nwhen_to_use: w\nmax_turns: 0\n---\n", "max_turns"),
        ("---\nname: Bad Name\ndescription: d\nwhen_to_use: w\n---\n", "must match"),
        ("---\n[unclosed\n---\n", "YAML"),
        ("---\n- a list\n---\n", "mapping"),
        ("---\nname: !!python/object:os.system x\n---\n", "YAML"),
        ("---\nname: x\ndescription: d\nwhen_to_use: w\ncan_delegate: 'yes'\n---\n", "true or"),
    ],
)
def test_a_malformed_persona_is_refused_with_a_clear_error(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        load_persona(write(tmp_path, text))
    assert message in caught.value.message


def test_a_dashed_persona_name_loads_with_a_warning(tmp_path: Path) -> None:
    text = "---\nname: night-watch\ndescription: d\nwhen_to_use: w\n---\n"
    persona = load_persona(write(tmp_path, text))
    assert persona.name == "night-watch"
    assert any("snake_case" in w for w in persona.warnings)


def test_the_bundled_default_persona_is_always_there_and_read_only(tmp_path: Path) -> None:
    registry = ongrid_skills.load_registry(external_dirs=[], persona_dirs=[], log=lambda _l: None)
    assert registry.persona("default").permission_mode is PermissionMode.READ_ONLY


def test_a_persona_may_delegate_only_when_its_file_says_so_and_the_coordinator_does(
    tmp_path: Path,
) -> None:
    text = "---\nname: lead\ndescription: d\nwhen_to_use: w\ncan_delegate: true\n---\n"
    lead = load_persona(write(tmp_path, text))
    assert lead.can_delegate and lead.summary()["can_delegate"] is True and not lead.extra
    registry = ongrid_skills.load_registry(external_dirs=[], persona_dirs=[], log=lambda _l: None)
    assert not registry.persona("default").can_delegate
    coordinator = registry.persona("coordinator")
    assert coordinator.can_delegate and coordinator.permission_mode is PermissionMode.READ_ONLY
    assert coordinator.origin == "bundled"


def test_personas_load_from_the_persona_dirs_and_the_first_name_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    write(first, RESPONDER)
    write(second, RESPONDER.replace("mutating-with-confirm", "dual-sign-required"))
    lines: list[str] = []
    registry = ongrid_skills.load_registry(
        external_dirs=[], persona_dirs=[str(first), str(second)], log=lines.append
    )
    assert registry.persona("ops_responder").permission_mode is PermissionMode.MUTATING_WITH_CONFIRM
    assert any('persona "ops_responder" already registered' in line for line in lines)


def test_a_broken_persona_file_is_logged_and_skipped(tmp_path: Path) -> None:
    write(tmp_path, "---\nname: x\n", "broken.md")
    write(tmp_path, RESPONDER, "good.md")
    lines: list[str] = []
    registry = ongrid_skills.load_registry(
        external_dirs=[], persona_dirs=[str(tmp_path)], log=lines.append
    )
    assert "ops_responder" in registry.personas
    assert any(line.startswith("skill loader: persona parse ") for line in lines)


def test_a_fifo_named_like_a_persona_never_blocks_the_loader(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "trap.md")
    write(tmp_path, RESPONDER, "good.md")
    with pytest.raises(ManifestError) as caught:
        load_persona(str(tmp_path / "trap.md"))
    assert caught.value.message == "not a regular file"
    lines: list[str] = []
    registry = ongrid_skills.load_registry(
        external_dirs=[], persona_dirs=[str(tmp_path)], log=lines.append
    )
    assert "ops_responder" in registry.personas
    assert any("trap.md: not a regular file" in line for line in lines)
