"""tools/list, as a real MCP client receives it, is the REST tool export of the same persona.

One skill tree of real skills (SKILL.md tools of every class, one needing a confirmation, with
declared idempotence and output schemas; a plain skill.json skill) is served twice: by the REST
door (``GET /v1/personas/{name}/tools?format=mcp``) and by the MCP server of the same code,
connected in-process to the official client. For every persona and role, each tool the client
lists equals the REST export field by field, annotations and output schema included.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from ongrid_skills.doors.mcp import create_mcp_server
from ongrid_skills.governance.principal import Principal
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.types import Role
from tests.support.agent import make_settings
from tests.support.mcp import write_skill
from tests.support.server import running_app
from tests.support.skills import write_exec, write_persona, write_skill_md

OUTPUT = {"type": "object", "properties": {"free_bytes": {"type": "integer"}}}
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
SAFE = ["disk_usage", "disk_usage_confirmed", "listing", "uptime"]
# Persona → (its permission mode, the tools it is offered besides the safe ones).
PERSONAS: dict[str | None, list[str]] = {
    None: [],
    "ops": ["disk_clean"],
    "root": ["disk_clean", "wipe"],
}
MODES = {"ops": "mutating-with-confirm", "root": "dual-sign-required"}
# The MCP client modes: the initialize handshake over JSON-RPC, and the 2026 in-process path.
CLIENT_MODES = ["legacy", "auto"]


def build_tree(base: Path) -> Settings:
    """SKILL.md tools of each class, declaring idempotence and output schemas, and skill.json."""
    native, external, personas = base / "native", base / "external", base / "personas"
    write_skill_md(
        native,
        "disk",
        {
            "name": "disk",
            "description": "Disk tools.",
            "idempotent": True,
            "output_schema": OUTPUT,
            "tools": [
                {"name": "disk_usage", "impl": "exec:run.sh", "class": "safe"},
                {
                    "name": "disk_usage_confirmed",
                    "impl": "exec:run.sh",
                    "class": "safe",
                    "confirmation": "required",
                },
                {
                    "name": "disk_clean",
                    "impl": "exec:run.sh",
                    "class": "mutating",
                    "schema": PATH_SCHEMA,
                },
            ],
        },
    )
    write_exec(native / "disk", "run.sh")
    write_skill_md(
        native,
        "files",
        {
            "name": "files",
            "description": "File tools.",
            "idempotent": "yes",  # not `true`: no idempotentHint
            "output_schema": {"type": "array"},  # not an object: never advertised
            "tools": [
                {"name": "listing", "impl": "exec:run.sh", "class": "safe"},
                {"name": "wipe", "impl": "exec:run.sh", "class": "dangerous"},
            ],
        },
    )
    write_exec(native / "files", "run.sh")
    write_skill_md(native, "runbook", {"name": "runbook", "description": "How we work."})
    write_skill(external, "uptime")
    for name, mode in MODES.items():
        write_persona(personas, name, mode)
    return make_settings(base, external, native_dirs=(str(native),))


def rest_exports(settings: Settings) -> dict[str | None, list[dict[str, Any]]]:
    """The REST door's MCP export of every persona (None: the read-only ``default``)."""
    exports = {}
    with running_app(settings) as server:
        for persona in PERSONAS:
            answer = server.call("GET", f"/v1/personas/{persona or 'default'}/tools?format=mcp")
            assert answer.status_code == 200, answer.text
            exports[persona] = answer.json()["tools"]
    return exports


def mcp_listings(
    settings: Settings, mode: str
) -> dict[tuple[str | None, Role], list[dict[str, Any]]]:
    """What the official client lists, for every persona and role, on a manager of its own."""
    listings: dict[tuple[str | None, Role], list[dict[str, Any]]] = {}

    async def scenario() -> None:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            for persona in PERSONAS:
                for role in Role:
                    principal = Principal(f"{role.value}-caller", role)
                    server = create_mcp_server(
                        manager, persona=persona, principal_for=lambda _ctx, p=principal: p
                    )
                    async with Client(server, mode=mode, raise_exceptions=True) as client:
                        listing = await client.list_tools()
                    listings[persona, role] = [
                        tool.model_dump(by_alias=True, exclude_none=True) for tool in listing.tools
                    ]

    anyio.run(scenario)
    return listings


@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_tools_list_equals_the_rest_export_for_every_persona_and_role(
    tmp_path: Path, mode: str
) -> None:
    settings = build_tree(tmp_path / "tree")
    exports = rest_exports(settings)
    # Its own data dir: the REST app above and this manager share only the skill tree.
    mcp_settings = dataclasses.replace(settings, data_dir=str(tmp_path / "mcp-data"))
    listings = mcp_listings(mcp_settings, mode)

    for persona, extra in PERSONAS.items():
        exported = {tool["name"]: tool for tool in exports[persona]}
        assert sorted(exported) == sorted([*SAFE, *extra])  # instructions skills are not tools
        for role in Role:
            listed = {tool["name"]: tool for tool in listings[persona, role]}
            get_execution = listed.pop("get_execution")
            assert get_execution["annotations"]["readOnlyHint"] is True
            # A viewer may run safe skills only: the rest is not even listed.
            expected = (
                {n: t for n, t in exported.items() if t["annotations"]["readOnlyHint"]}
                if role is Role.VIEWER
                else exported
            )
            assert sorted(listed) == sorted(expected), (persona, role)
            for name, tool in expected.items():
                assert listed[name] == tool, (persona, role, name)


def test_tools_list_carries_the_class_and_declarations_of_each_skill(tmp_path: Path) -> None:
    settings = build_tree(tmp_path / "tree")
    tools = {t["name"]: t for t in mcp_listings(settings, "legacy")["root", Role.ADMIN]}
    hints = {
        name: tuple(tools[name]["annotations"][k] for k in ("readOnlyHint", "destructiveHint"))
        for name in tools
    }
    assert hints["disk_usage"] == hints["listing"] == hints["uptime"] == (True, False)
    assert hints["disk_clean"] == (False, False)  # mutating
    assert hints["wipe"] == (False, True)  # dangerous
    assert tools["disk_clean"]["inputSchema"] == PATH_SCHEMA

    assert tools["uptime"]["annotations"]["idempotentHint"] is False  # nothing declared
    assert tools["disk_usage"]["annotations"]["idempotentHint"] is True
    assert tools["listing"]["annotations"]["idempotentHint"] is False  # `idempotent: "yes"`

    # An output schema only where every answer of the call is the skill's own result.
    assert tools["disk_usage"]["outputSchema"] == OUTPUT
    assert "outputSchema" not in tools["disk_clean"]  # may answer "pending approval"
    assert "outputSchema" not in tools["disk_usage_confirmed"]  # idem: waits for a confirmation
    assert "outputSchema" not in tools["listing"]  # declared, but not an object
