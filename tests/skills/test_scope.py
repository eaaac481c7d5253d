"""Where a skill runs (SPEC §17): ``scope`` in skill.json and ``metadata.ongrid.scope`` in SKILL.md,
loaded from real folders by the real loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.skills.model import SCOPE_HOST, SCOPE_MANAGER
from tests.support.skills import load, write_exec, write_skill, write_skill_md

BOX_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def refusal(lines: list[str]) -> str:
    """The one loader line saying a file was refused (a parse or build error)."""
    found = [
        line for line in lines if line.startswith(("skill loader: build", "skill loader: parse"))
    ]
    assert len(found) == 1, lines
    return found[0]


@pytest.mark.parametrize(
    ("written", "scope"),
    [(None, SCOPE_MANAGER), ("manager", SCOPE_MANAGER), ("host", SCOPE_HOST), ("Edge", SCOPE_HOST)],
)
def test_skill_json_scope_is_read_with_manager_as_the_default(
    tmp_path: Path, written: str | None, scope: str
) -> None:
    fields: dict[str, Any] = {"schema": BOX_SCHEMA}
    if written is not None:
        fields["scope"] = written
    write_skill(tmp_path, "clean_disk", **fields)
    registry, _lines = load(external=[tmp_path])
    skill = registry.get("clean_disk")
    assert skill.scope == scope
    assert skill.summary()["scope"] == scope


@pytest.mark.parametrize("written", ["pod", 3, None, ""])
def test_an_unknown_skill_json_scope_is_a_build_error_naming_the_field(
    tmp_path: Path, written: Any
) -> None:
    write_skill(tmp_path, "clean_disk", scope=written)
    registry, lines = load(external=[tmp_path])
    assert "clean_disk" not in registry
    assert "scope must be manager or host" in refusal(lines)


def test_a_host_skill_that_declares_a_host_argument_is_refused(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"host": {"type": "string"}}}
    write_skill(tmp_path, "clean_disk", scope="host", schema=schema)
    registry, lines = load(external=[tmp_path])
    assert "clean_disk" not in registry
    assert "cannot declare an argument named 'host'" in refusal(lines)


def test_a_manager_skill_may_take_a_host_argument(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"host": {"type": "string"}}}
    write_skill(tmp_path, "ping_host", schema=schema)
    registry, _lines = load(external=[tmp_path])
    assert registry.get("ping_host").scope == SCOPE_MANAGER


def test_the_scope_of_a_host_skill_is_part_of_its_definition(tmp_path: Path) -> None:
    write_skill(tmp_path / "a", "clean_disk", schema=BOX_SCHEMA)
    write_skill(tmp_path / "b", "clean_disk", schema=BOX_SCHEMA, scope="host")
    first = load(external=[tmp_path / "a"])[0].get("clean_disk")
    second = load(external=[tmp_path / "b"])[0].get("clean_disk")
    assert first.load_hash != second.load_hash


@pytest.mark.parametrize("written", ["host", "edge"])
def test_skill_md_metadata_ongrid_scope_applies_to_every_tool(tmp_path: Path, written: str) -> None:
    folder = tmp_path / "disk"
    write_exec(folder, "clean.sh")
    write_skill_md(
        tmp_path,
        "disk",
        {
            "name": "disk",
            "description": "Disk care on the host.",
            "metadata": {"ongrid": {"scope": written}},
            "tools": [
                {"name": "clean_disk", "impl": "exec:clean.sh"},
                {"name": "disk_usage_here", "impl": "builtin:files.disk_usage"},
            ],
        },
    )
    registry, _lines = load(native=[tmp_path])
    assert registry.get("clean_disk").scope == SCOPE_HOST
    assert registry.get("disk_usage_here").scope == SCOPE_HOST


def test_skill_md_without_a_scope_runs_on_the_manager(tmp_path: Path) -> None:
    folder = tmp_path / "disk"
    write_exec(folder, "clean.sh")
    front = {
        "name": "disk",
        "description": "Disk care.",
        "tools": [{"name": "clean_disk", "impl": "exec:clean.sh"}],
    }
    write_skill_md(tmp_path, "disk", front)
    registry, _lines = load(native=[tmp_path])
    assert registry.get("clean_disk").scope == SCOPE_MANAGER


def test_skill_md_host_scope_refuses_a_host_argument(tmp_path: Path) -> None:
    write_exec(tmp_path / "disk", "x.sh")
    tools: Any = [{"name": "x", "impl": "exec:x.sh", "schema": {"properties": {"host": {}}}}]
    front: dict[str, Any] = {
        "name": "disk",
        "description": "Disk care.",
        "metadata": {"ongrid": {"scope": "host"}},
        "tools": tools,
    }
    write_skill_md(tmp_path, "disk", front)
    registry, lines = load(native=[tmp_path])
    assert len(registry) == 0
    assert "cannot declare an argument named 'host'" in refusal(lines)


@pytest.mark.parametrize("written", ["edge", "host"])
def test_a_prompt_only_skill_md_with_an_edge_scope_loads_as_instructions_on_the_manager(
    tmp_path: Path, written: str
) -> None:
    front = {
        "name": "disk_runbook",
        "description": "How to free a full disk on an edge host.",
        "metadata": {"ongrid": {"scope": written}},
    }
    path = write_skill_md(tmp_path, "disk", front, "# Free the disk\nStep one.\n")
    registry, lines = load(native=[tmp_path])
    skill = registry.get("disk_runbook")
    assert (skill.kind, skill.scope, skill.available) == ("instructions", SCOPE_MANAGER, True)
    assert [w.code for w in registry.report.warnings] == ["edge_instructions"]
    assert any(line.startswith(f"skill loader: warning {path}: scope edge") for line in lines)


def test_skill_md_unknown_scope_is_refused(tmp_path: Path) -> None:
    front = {"name": "disk", "description": "d", "metadata": {"ongrid": {"scope": "cluster"}}}
    write_skill_md(tmp_path, "disk", front)
    registry, lines = load(native=[tmp_path])
    assert len(registry) == 0
    assert "metadata.ongrid.scope must be manager, host or edge" in refusal(lines)


def test_the_bundled_prometheus_skill_keeps_its_manager_scope() -> None:
    registry, _lines = load(bundled=True)
    assert registry.get("query_promql").scope == SCOPE_MANAGER
