"""Every field a SKILL.md declares is kept and shown; a min_ongrid_version this build does not
meet makes the skill unavailable; tools' confirmation modes are honoured, never weaker than the
class requires; JSON-text metadata gates a skill like the object form does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import ApprovalRequired, Status
from ongrid_skills.skills.ongrid_block import running_version
from tests.support.skills import load, write_exec, write_persona, write_skill_md

SLOT = {
    "slot": "cloud",
    "label": "Cloud account",
    "fields": ["token"],
    "inject": {"env": {"CLOUD_TOKEN": "{{token}}"}},
}


def original(**ongrid: Any) -> dict[str, Any]:
    """The original's frontmatter with every ongrid field."""
    return {
        "name": "node_drain",
        "description": "Drain a node before maintenance.",
        "metadata": {
            "requires": {"bins": [], "config": [], "credentials": [SLOT]},
            "ongrid": {
                "scope": "manager",
                "edge_runtime": "python3.11",
                "edge_capabilities": ["systemd", "journald"],
                **ongrid,
            },
        },
    }


def test_the_originals_declared_fields_are_kept_and_shown(tmp_path: Path) -> None:
    write_skill_md(tmp_path, "drain", original(min_ongrid_version="0.1"))
    registry, lines = load([tmp_path])
    skill = registry.get("node_drain")
    assert skill.kind == "instructions" and skill.available
    extra = skill.summary()["extra"]
    assert extra["metadata.ongrid.edge_runtime"] == "python3.11"
    assert extra["metadata.ongrid.edge_capabilities"] == ["systemd", "journald"]
    assert extra["metadata.ongrid.min_ongrid_version"] == "0.1"
    assert extra["metadata.requires.credentials"] == [SLOT]
    # an instructions skill has no process to give a credential to: kept, with a warning
    assert [w.code for w in registry.report.warnings] == ["credentials_not_used"]
    assert not registry.report.errors, lines


def test_an_exec_tool_keeps_its_slots_and_shows_the_declaration(tmp_path: Path) -> None:
    front = original()
    front["tools"] = [{"name": "drain_node", "impl": "exec:drain.sh", "class": "mutating"}]
    write_exec(tmp_path / "drain", "drain.sh")
    write_skill_md(tmp_path, "drain", front)
    registry, _ = load([tmp_path])
    tool = registry.get("drain_node")
    assert [slot.slot for slot in tool.credentials] == ["cloud"]
    assert tool.summary()["extra"]["metadata.requires.credentials"] == [SLOT]
    assert tool.summary()["extra"]["metadata.ongrid.edge_runtime"] == "python3.11"


@pytest.mark.parametrize(
    ("wanted", "reason"),
    [
        ("99.0", f"needs ongrid-skills 99.0 or newer; this is {running_version()}"),
        ("soon", "min_ongrid_version 'soon' is not a version: cannot be checked"),
    ],
)
def test_a_min_ongrid_version_this_build_does_not_meet_makes_the_skill_unavailable(
    tmp_path: Path, wanted: str, reason: str
) -> None:
    front = original(min_ongrid_version=wanted)
    del front["metadata"]["requires"]["credentials"]  # a builtin: runs in-process
    front["tools"] = [{"name": "drain_usage", "impl": "builtin:files.disk_usage"}]
    path = write_skill_md(tmp_path, "drain", front)
    registry, lines = load([tmp_path])
    skill = registry.get("drain_usage")
    assert (skill.available, skill.unavailable_reason) == (False, reason)
    assert f'registered native skill "drain_usage" from {path} (unavailable: {reason})' in [
        line.removeprefix("skill loader: ") for line in lines
    ]
    with pytest.raises(ongrid_skills.Denied, match="unavailable: "):
        asyncio.run(ongrid_skills.execute(registry, "drain_usage", {"path": str(tmp_path)}))


def test_unknown_keys_of_the_ongrid_and_requires_blocks_are_kept_with_a_warning(
    tmp_path: Path,
) -> None:
    front = original(rollout="canary")
    front["metadata"]["requires"]["anyBins"] = ["kubectl", "oc"]
    write_skill_md(tmp_path, "drain", front)
    registry, _ = load([tmp_path])
    extra = registry.get("node_drain").extra or {}
    assert extra["metadata.ongrid.rollout"] == "canary"
    assert extra["metadata.requires.anyBins"] == ["kubectl", "oc"]
    codes = sorted(w.code for w in registry.report.warnings)
    assert codes == ["credentials_not_used", "unknown_key", "unknown_key"]


@pytest.mark.parametrize(
    "metadata",
    [
        {"openclaw": '{"requires": {"env": ["DRAIN_TOKEN_X1"]}}'},
        '{"openclaw": {"requires": {"env": ["DRAIN_TOKEN_X1"]}}}',
        {"openclaw": {"requires": {"env": ["DRAIN_TOKEN_X1"]}}},
    ],
    ids=["child-as-json-text", "metadata-as-json-text", "object"],
)
def test_openclaw_requirements_written_as_json_text_gate_like_the_object_form(
    tmp_path: Path, metadata: Any
) -> None:
    front = {"name": "drain", "description": "Drain.", "metadata": metadata}
    write_skill_md(tmp_path, "drain", front)
    registry, _ = load([tmp_path])
    skill = registry.get("drain")
    assert (skill.available, skill.unavailable_reason) == (
        False,
        "missing environment variables: DRAIN_TOKEN_X1",
    )
    assert (skill.extra or {})["metadata.openclaw"] == {"requires": {"env": ["DRAIN_TOKEN_X1"]}}


def test_a_dotted_metadata_key_is_read_as_part_of_metadata(tmp_path: Path) -> None:
    text = (
        "name: drain\ndescription: Drain.\n"
        'metadata.openclaw: \'{"requires": {"env": ["DRAIN_TOKEN_X1"]}}\'\n'
    )
    write_skill_md(tmp_path, "drain", text)
    registry, _ = load([tmp_path])
    assert registry.get("drain").unavailable_reason == (
        "missing environment variables: DRAIN_TOKEN_X1"
    )


# ---- confirmation modes ---------------------------------------------------------------------
@pytest.fixture
def confirming(tmp_path: Path) -> tuple[Any, Path]:
    tools = [
        {"name": "peek_safe", "impl": "exec:ok.sh", "confirmation": "not-required"},
        {"name": "peek_self", "impl": "exec:ok.sh", "confirmation": "self-managed"},
        {"name": "peek_asked", "impl": "exec:ok.sh", "confirmation": "required"},
        {"name": "peek_odd", "impl": "exec:ok.sh", "confirmation": "sometimes"},
        {
            "name": "restart_it",
            "impl": "exec:ok.sh",
            "class": "mutating",
            "confirmation": "not-required",
        },
    ]
    write_exec(tmp_path / "native" / "c", "ok.sh")
    write_skill_md(tmp_path / "native", "c", {"name": "c", "description": "C.", "tools": tools})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    registry, _ = load([tmp_path / "native"], personas=[tmp_path / "personas"])
    return registry, tmp_path


def run(registry: Any, name: str, **kw: Any) -> Any:
    return asyncio.run(ongrid_skills.execute(registry, name, {}, persona="fixer", **kw))


def test_not_required_asks_what_the_class_asks_and_never_less(
    confirming: tuple[Any, Path],
) -> None:
    registry, _ = confirming
    assert run(registry, "peek_safe").status is Status.SUCCEEDED
    assert registry.get("peek_safe").summary()["confirmation"] == "not-required"
    with pytest.raises(ApprovalRequired):  # mutating: its one confirmation still applies
        run(registry, "restart_it")
    assert run(registry, "restart_it", confirm=True).status is Status.SUCCEEDED


@pytest.mark.parametrize("name", ["peek_self", "peek_asked", "peek_odd"])
def test_self_managed_required_and_unknown_modes_ask_one_confirmation_even_when_safe(
    confirming: tuple[Any, Path], name: str
) -> None:
    registry, _ = confirming
    assert registry.get(name).confirmation_required
    with pytest.raises(ApprovalRequired):
        run(registry, name)
    assert run(registry, name, confirm=True).status is Status.SUCCEEDED


def test_an_unknown_confirmation_mode_is_a_coded_warning(confirming: tuple[Any, Path]) -> None:
    registry, _ = confirming
    (warning,) = registry.report.warnings
    assert warning.code == "confirmation_unknown"
    assert "tools[3].confirmation 'sometimes'" in warning.message
    assert registry.get("peek_odd").summary()["confirmation"] == "required"
