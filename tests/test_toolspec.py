"""What the LLM sees (SPEC §7): the offered set, keyword activation, exports, deferral."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

import ongrid_skills
from ongrid_skills import Status
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry
from ongrid_skills.toolspec import (
    DEFAULT_DEFERRAL_THRESHOLD,
    FORMATS,
    Toolbag,
    export,
    export_all,
    instructions,
    offered,
)
from ongrid_skills.types import SkillClass
from tests.support.skills import load, write_exec, write_persona, write_skill, write_skill_md

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


def names(skills: list[Any]) -> list[str]:
    return [s.name for s in skills]


# ---- a fixed small registry ------------------------------------------------------------------
def ops_registry(tmp_path: Path) -> Registry:
    """check_port (safe, with when_to_use), restart_unit (mutating), wipe_disk (dangerous)."""
    native = tmp_path / "native"
    tools = [
        {
            "name": "check_port",
            "impl": "exec:run.sh",
            "class": "read",
            "description": "Check a port.",
            "when_to_use": "When a service may be down.",
            "schema": {
                "type": "object",
                "properties": {"port": {"type": "integer", "minimum": 1}},
                "required": ["port"],
            },
        },
        {
            "name": "restart_unit",
            "impl": "exec:run.sh",
            "class": "write",
            "description": "Restart a unit.",
            "schema": {"properties": {"unit": {"type": "string"}}},
        },
        {
            "name": "wipe_disk",
            "impl": "exec:run.sh",
            "class": "destructive",
            "description": "Wipe a disk.",
        },
    ]
    write_skill_md(native, "ops", {"name": "ops", "description": "Ops tools.", "tools": tools})
    write_exec(native / "ops", "run.sh")
    personas = tmp_path / "personas"
    write_persona(personas, "reader", "read-only")
    write_persona(personas, "changer", "mutating-with-confirm")
    write_persona(personas, "signer", "dual-sign-required")
    registry, lines = load([native], personas=[personas])
    assert not registry.report.errors, lines
    return registry


CHECK_PORT_SCHEMA = {
    "type": "object",
    "properties": {"port": {"type": "integer", "minimum": 1}},
    "required": ["port"],
}
RESTART_SCHEMA = {"type": "object", "properties": {"unit": {"type": "string"}}}
EMPTY_SCHEMA = {"type": "object", "properties": {}}
CHECK_PORT_DESCRIPTION = "Check a port.\n\nWhen to use: When a service may be down."

SNAPSHOTS: dict[str, list[dict[str, Any]]] = {
    "openai": [
        {
            "type": "function",
            "function": {
                "name": "check_port",
                "description": CHECK_PORT_DESCRIPTION,
                "parameters": CHECK_PORT_SCHEMA,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "restart_unit",
                "description": "Restart a unit.",
                "parameters": RESTART_SCHEMA,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "wipe_disk",
                "description": "Wipe a disk.",
                "parameters": EMPTY_SCHEMA,
            },
        },
    ],
    "anthropic": [
        {
            "name": "check_port",
            "description": CHECK_PORT_DESCRIPTION,
            "input_schema": CHECK_PORT_SCHEMA,
        },
        {"name": "restart_unit", "description": "Restart a unit.", "input_schema": RESTART_SCHEMA},
        {"name": "wipe_disk", "description": "Wipe a disk.", "input_schema": EMPTY_SCHEMA},
    ],
    "mcp": [
        {
            "name": "check_port",
            "title": "check port",
            "description": CHECK_PORT_DESCRIPTION,
            "inputSchema": CHECK_PORT_SCHEMA,
            "annotations": {
                "title": "check port",
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": False,
                "openWorldHint": True,
            },
        },
        {
            "name": "restart_unit",
            "title": "restart unit",
            "description": "Restart a unit.",
            "inputSchema": RESTART_SCHEMA,
            "annotations": {
                "title": "restart unit",
                "readOnlyHint": False,
                "destructiveHint": False,
                "idempotentHint": False,
                "openWorldHint": True,
            },
        },
        {
            "name": "wipe_disk",
            "title": "wipe disk",
            "description": "Wipe a disk.",
            "inputSchema": EMPTY_SCHEMA,
            "annotations": {
                "title": "wipe disk",
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": False,
                "openWorldHint": True,
            },
        },
    ],
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_snapshot_per_format(tmp_path: Path, fmt: str) -> None:
    registry = ops_registry(tmp_path)
    tools = offered(registry, registry.persona("signer"))
    assert export_all(tools, fmt) == SNAPSHOTS[fmt]


def test_export_does_not_change_the_skill_schema(tmp_path: Path) -> None:
    registry = ops_registry(tmp_path)
    skill = registry.get("restart_unit")
    export(skill, "openai")
    assert skill.schema == {"properties": {"unit": {"type": "string"}}}


def test_an_unknown_export_format_is_refused(tmp_path: Path) -> None:
    registry = ops_registry(tmp_path)
    with pytest.raises(ValueError, match="format must be one of openai, anthropic, mcp"):
        export(registry.get("check_port"), "gemini")


def exported_schema(item: dict[str, Any], fmt: str) -> dict[str, Any]:
    if fmt == "openai":
        return dict(item["function"]["parameters"])
    return dict(item["input_schema" if fmt == "anthropic" else "inputSchema"])


def exported_name(item: dict[str, Any], fmt: str) -> str:
    return str(item["function"]["name"] if fmt == "openai" else item["name"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_exported_tool_has_a_valid_name_and_an_object_schema(
    tmp_path: Path, fmt: str
) -> None:
    registry = ops_registry(tmp_path)
    bundled, _ = load(bundled=True)
    every = [
        *export_all(offered(registry, registry.persona("signer")), fmt),
        *export_all(offered(bundled), fmt),
    ]
    assert len(every) >= 3 + 7
    for item in every:
        name = exported_name(item, fmt)
        assert len(name) <= 64
        assert NAME_RE.fullmatch(name), name
        schema = exported_schema(item, fmt)
        assert schema["type"] == "object"
        assert isinstance(schema["properties"], dict)
        assert jsonschema_rs.meta.is_valid(schema), (name, schema)


def test_bundled_tools_carry_their_when_to_use_in_the_description() -> None:
    bundled, _ = load(bundled=True)
    for item in export_all(offered(bundled), "anthropic"):
        skill = bundled.get(item["name"])
        if skill.when_to_use:
            assert item["description"] == (
                f"{skill.description}\n\nWhen to use: {skill.when_to_use}"
            )
        else:
            assert item["description"] == skill.description


# ---- persona filtering -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("default", ["check_port"]),
        ("reader", ["check_port"]),
        ("changer", ["check_port", "restart_unit"]),
        ("signer", ["check_port", "restart_unit", "wipe_disk"]),
    ],
)
def test_each_permission_mode_is_offered_only_the_classes_it_may_run(
    tmp_path: Path, persona: str, expected: list[str]
) -> None:
    registry = ops_registry(tmp_path)
    assert names(offered(registry, registry.persona(persona))) == expected


def test_no_persona_means_the_default_read_only_one(tmp_path: Path) -> None:
    registry = ops_registry(tmp_path)
    assert names(offered(registry)) == ["check_port"]


@pytest.fixture
def patterned(tmp_path: Path) -> Registry:
    external = tmp_path / "external"
    for name in ("probe_tcp", "probe_delete", "tail_file", "disk_delete", "cloud_list"):
        write_skill(external, name)
    write_skill(external, "probe_restart", **{"class": "mutating"})
    personas = tmp_path / "personas"
    write_persona(personas, "whitelisted", "dual-sign-required", tools=["probe_*"])
    write_persona(personas, "blacklisted", "dual-sign-required", disallowed_tools=["*_delete"])
    write_persona(
        personas,
        "both",
        "dual-sign-required",
        tools=["probe_*", "tail_file"],
        disallowed_tools=["*_delete"],
    )
    write_persona(personas, "ro_probes", "read-only", tools=["probe_*"])
    write_persona(
        personas, "everything_but", "dual-sign-required", tools=["*"], disallowed_tools=["cloud_*"]
    )
    registry, _ = load(external=[external], personas=[personas])
    return registry


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("whitelisted", ["probe_delete", "probe_restart", "probe_tcp"]),
        ("blacklisted", ["cloud_list", "probe_restart", "probe_tcp", "tail_file"]),
        ("both", ["probe_restart", "probe_tcp", "tail_file"]),
        ("ro_probes", ["probe_delete", "probe_tcp"]),
        (
            "everything_but",
            ["disk_delete", "probe_delete", "probe_restart", "probe_tcp", "tail_file"],
        ),
    ],
)
def test_whitelist_and_blacklist_patterns_filter_the_offer_and_the_blacklist_wins(
    patterned: Registry, persona: str, expected: list[str]
) -> None:
    assert names(offered(patterned, patterned.persona(persona))) == expected


def test_a_blacklisted_tool_is_refused_when_called_even_if_whitelisted(patterned: Registry) -> None:
    with pytest.raises(ongrid_skills.Denied, match="not allowed the tool probe_delete"):
        asyncio.run(ongrid_skills.execute(patterned, "probe_delete", {}, persona="both"))


def test_unavailable_tools_are_never_offered_whatever_the_persona(tmp_path: Path) -> None:
    native = tmp_path / "native"
    tools = [
        {"name": "gone", "impl": "builtin:nope.nothing"},
        {"name": "gone_far", "impl": "builtin:files.disk_usage", "class": "dangerous"},
    ]
    write_skill_md(native, "gone", {"name": "gone", "description": "d", "tools": tools})
    far = [{"name": "far", "impl": "builtin:files.disk_usage"}]
    write_skill_md(
        native,
        "far",
        {"name": "far", "description": "d", "metadata": {"os": ["plan9"]}, "tools": far},
    )
    personas = tmp_path / "personas"
    write_persona(personas, "all", "dual-sign-required", tools=["gone", "far"])
    registry, _ = load([native], personas=[personas])
    assert sorted(registry.skills) == ["far", "gone", "gone_far"]
    for persona in ("default", "all"):
        assert offered(registry, registry.persona(persona)) == []


# ---- keyword activation ----------------------------------------------------------------------
@pytest.fixture
def keyworded(tmp_path: Path) -> Registry:
    native = tmp_path / "native"
    write_skill_md(
        native,
        "disk",
        {
            "name": "disk_help",
            "description": "Disk tools.",
            "activation": {"mode": "keyword", "keywords": ["disk", "Inode"]},
            "tools": [{"name": "disk_tool", "impl": "exec:run.sh"}],
        },
    )
    write_exec(native / "disk", "run.sh")
    write_skill_md(
        native,
        "probe",
        {
            "name": "probe",
            "description": "Probe.",
            "activation": {"mode": "always"},
            "tools": [{"name": "probe_tool", "impl": "exec:run.sh"}],
        },
    )
    write_exec(native / "probe", "run.sh")
    write_skill_md(
        native,
        "nginx",
        {
            "name": "nginx_guide",
            "description": "How we run nginx.",
            "activation": {"mode": "keyword", "keywords": ["nginx"]},
        },
    )
    write_skill_md(native, "runbook", {"name": "runbook", "description": "General runbook."})
    registry, _ = load([native])
    return registry


@pytest.mark.parametrize(
    ("message", "active"),
    [
        (None, False),
        ("", False),
        ("the cpu is hot", False),
        ("my DISKS are full", True),
        ("no inodes left on /var", True),
        ("Disk", True),
    ],
)
def test_a_keyword_tool_is_offered_only_when_a_keyword_occurs_in_the_message(
    keyworded: Registry, message: str | None, active: bool
) -> None:
    expected = ["disk_tool", "probe_tool"] if active else ["probe_tool"]
    assert names(offered(keyworded, None, message)) == expected


def test_instructions_skills_are_not_tools_but_are_listed_when_active(keyworded: Registry) -> None:
    assert "runbook" not in names(offered(keyworded, None, "nginx"))
    assert names(instructions(keyworded)) == ["runbook"]
    assert names(instructions(keyworded, None, "nginx returns 502")) == ["nginx_guide", "runbook"]
    assert names(instructions(keyworded, None, "NGINX")) == ["nginx_guide", "runbook"]


def test_instructions_skills_follow_the_persona_tool_lists(
    keyworded: Registry, tmp_path: Path
) -> None:
    personas = tmp_path / "p"
    write_persona(personas, "no_runbook", disallowed_tools=["runbook"])
    registry, _ = load([tmp_path / "native"], personas=[personas])
    assert names(instructions(registry, registry.persona("no_runbook"), "nginx")) == ["nginx_guide"]


# ---- deferral --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The bundled catalogue, 100 generated external skills and a few meaningful ones."""
    external = tmp_path_factory.mktemp("big")
    for i in range(100):
        write_skill(
            external,
            f"task_{i:03d}",
            description=f"Routine maintenance task number {i} for the batch cluster.",
        )
    write_skill(
        external,
        "rotate_nginx_logs",
        description="Rotate the nginx access and error logs and reopen them.",
        when_to_use="When nginx log files grow too large.",
    )
    write_skill(
        external,
        "restart_nginx",
        description="Restart the nginx service.",
        **{"class": "mutating"},
    )
    registry, lines = load(external=[external], bundled=True)
    assert not registry.report.errors, lines
    return registry


def test_above_the_threshold_only_always_tools_and_search_skills_are_offered(big: Registry) -> None:
    bag = Toolbag(big)
    assert bag.threshold == DEFAULT_DEFERRAL_THRESHOLD == 30
    every = bag.all_offered()
    assert len(every) > 100
    assert bag.deferred
    tools = names(bag.tools())
    assert "search_skills" in tools
    assert {"probe_tcp", "tail_file", "read_skill"} <= set(tools)
    assert not any(name.startswith("task_") for name in tools)
    assert "rotate_nginx_logs" not in tools
    assert tools == [s.name for s in every if s.activation == "always"]
    assert len(tools) <= 30


def test_search_then_mount_offers_the_found_tool_on_the_next_turn(big: Registry) -> None:
    bag = Toolbag(big)
    found = asyncio.run(
        ongrid_skills.execute(big, "search_skills", {"query": "rotate nginx logs", "limit": 3})
    )
    assert found.status is Status.SUCCEEDED, found.error
    results = found.result["results"]
    assert results[0]["name"] == "rotate_nginx_logs"
    assert not bag.permits("rotate_nginx_logs")
    assert bag.mount([results[0]["name"]]) == ["rotate_nginx_logs"]
    assert "rotate_nginx_logs" in names(bag.tools())
    assert bag.permits("rotate_nginx_logs")
    assert bag.mount(["rotate_nginx_logs"]) == []  # already mounted
    assert not any(name.startswith("task_") for name in names(bag.tools()))


def test_mount_refuses_tools_the_persona_may_not_run(big: Registry) -> None:
    bag = Toolbag(big)
    assert bag.mount(["restart_nginx", "no_such_tool", "task_007"]) == ["task_007"]
    tools = names(bag.tools())
    assert "restart_nginx" not in tools
    assert "task_007" in tools
    assert not bag.permits("restart_nginx")


def test_below_the_threshold_everything_is_offered(big: Registry) -> None:
    bag = Toolbag(big, threshold=1000)
    assert not bag.deferred
    assert names(bag.tools()) == names(offered(big))
    assert "task_042" in names(bag.tools())


def test_exactly_at_the_threshold_nothing_is_deferred(big: Registry) -> None:
    count = len(offered(big))
    assert not Toolbag(big, threshold=count).deferred
    assert Toolbag(big, threshold=count - 1).deferred


# ---- MCP extras: idempotent and output_schema, read from a skill's extra keys in one place -----
OUTPUT_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def probe_skill(**kw: object) -> Skill:
    return Skill(name="probe", description="Probe.", **kw)  # type: ignore[arg-type]


def test_idempotent_and_output_schema_are_exported_for_a_safe_skill() -> None:
    tool = export(probe_skill(extra={"idempotent": True, "output_schema": OUTPUT_SCHEMA}), "mcp")
    assert tool["annotations"]["idempotentHint"] is True
    assert tool["outputSchema"] == OUTPUT_SCHEMA


def test_without_declarations_the_hints_stay_conservative() -> None:
    tool = export(probe_skill(), "mcp")
    assert tool["annotations"]["idempotentHint"] is False
    assert "outputSchema" not in tool


def test_no_output_schema_for_calls_that_may_answer_with_a_pending_approval() -> None:
    mutating = probe_skill(skill_class=SkillClass.MUTATING, extra={"output_schema": OUTPUT_SCHEMA})
    confirmed = probe_skill(confirmation_required=True, extra={"output_schema": OUTPUT_SCHEMA})
    not_object = probe_skill(extra={"output_schema": {"type": "array"}})
    for candidate in (mutating, confirmed, not_object):
        assert "outputSchema" not in export(candidate, "mcp")
