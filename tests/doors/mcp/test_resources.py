"""Skills as MCP resources, as the official client sees them: ``skill://<name>/SKILL.md`` and
``skill://<name>/<path>`` for the SKILL.md skills of the caller's view, read confined to the
skill's folder like read_skill_file, refused with MCP errors carrying the refusal's code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from ongrid_skills.doors.mcp import create_mcp_server
from ongrid_skills.doors.mcp.resources import PAGE_SKILLS, RESOURCE_NOT_FOUND
from ongrid_skills.governance.principal import Principal
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.types import Role
from tests.support.agent import make_settings
from tests.support.skills import write_exec, write_persona, write_skill_md

GUIDE = "# Guide\nSee {baseDir}/reference.md.\n"


def build(base: Path) -> Settings:
    native = base / "obra__superpowers"
    guide = native / "guide"
    write_skill_md(
        native, "guide", {"name": "release-guide", "description": "How we release."}, GUIDE
    )
    (guide / "reference.md").write_text("# Reference\n")
    (guide / "templates").mkdir()
    (guide / "templates" / "notes v1.md").write_text("notes\n")
    (guide / "blob.bin").write_bytes(b"\0\1\2")
    (base / "secret.txt").write_text("top secret\n")
    (guide / "escape.md").symlink_to(base / "secret.txt")
    tools = [
        {"name": "wipe_disk", "impl": "exec:run.sh", "class": "destructive"},
        {"name": "disk_report", "impl": "exec:run.sh", "class": "read"},
    ]
    write_skill_md(native, "disk", {"name": "disk", "description": "Disk tools.", "tools": tools})
    write_exec(native / "disk", "run.sh")
    personas = base / "personas"
    write_persona(personas, "narrow", "read-only", tools=["disk_*"])
    external = base / "external"
    external.mkdir()
    return make_settings(base, external, native_dirs=(str(native),))


@asynccontextmanager
async def connected(
    settings: Settings, persona: str | None = None, role: Role = Role.OPERATOR
) -> AsyncIterator[Client]:
    async with open_manager(settings, loader_sink=lambda _line: None) as manager:
        principal = Principal("caller", role)
        server = create_mcp_server(manager, persona=persona, principal_for=lambda _ctx: principal)
        async with Client(server, raise_exceptions=True) as client:
            yield client


def text_of(result: types.ReadResourceResult) -> str:
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    return content.text


def test_resources_list_the_skill_md_and_bundled_files_of_the_view(tmp_path: Path) -> None:
    settings = build(tmp_path)

    async def scenario() -> None:
        async with connected(settings) as client:
            listed = await client.list_resources()
            uris = [r.uri for r in listed.resources]
            assert uris == [
                "skill://disk_report/SKILL.md",  # one entry per SKILL.md: its first visible tool
                "skill://disk_report/run.sh",
                "skill://release_guide/SKILL.md",
                "skill://release_guide/blob.bin",
                "skill://release_guide/reference.md",
                "skill://release_guide/templates/notes%20v1.md",
            ]
            assert listed.next_cursor is None
            guide = next(r for r in listed.resources if r.uri == "skill://release_guide/SKILL.md")
            assert guide.description == "How we release."
            assert guide.mime_type == "text/markdown"
            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates.resource_templates] == [
                "skill://{name}/{+path}"
            ]

    anyio.run(scenario)


def test_resources_read_serves_the_files_by_name_or_alias(tmp_path: Path) -> None:
    settings = build(tmp_path)
    folder = str((tmp_path / "obra__superpowers" / "guide").resolve())

    async def scenario() -> None:
        async with connected(settings) as client:
            skill_md = text_of(await client.read_resource("skill://release_guide/SKILL.md"))
            assert skill_md.startswith("---\nname: release-guide")
            assert f"See {folder}/reference.md." in skill_md
            by_alias = await client.read_resource("skill://superpowers:release-guide/reference.md")
            assert text_of(by_alias) == "# Reference\n"
            spaced = await client.read_resource("skill://release_guide/templates/notes%20v1.md")
            assert text_of(spaced) == "notes\n"

    anyio.run(scenario)


@pytest.mark.parametrize(
    ("uri", "code", "refusal"),
    [
        ("skill://release_guide/escape.md", types.INVALID_PARAMS, "outside_skill"),
        ("skill://release_guide/../disk/run.sh", types.INVALID_PARAMS, "outside_skill"),
        ("skill://release_guide/blob.bin", types.INVALID_PARAMS, "binary_file"),
        ("skill://release_guide/missing.md", RESOURCE_NOT_FOUND, "file_not_found"),
        ("skill://nope/SKILL.md", RESOURCE_NOT_FOUND, None),
        ("file:///etc/passwd", RESOURCE_NOT_FOUND, None),
    ],
)
def test_resources_read_refuses_with_mcp_errors(
    tmp_path: Path, uri: str, code: int, refusal: str | None
) -> None:
    settings = build(tmp_path)

    async def scenario() -> None:
        async with connected(settings) as client:
            with pytest.raises(MCPError) as info:
                await client.read_resource(uri)
            assert info.value.code == code
            if refusal is not None:
                assert info.value.data["code"] == refusal
            assert "top secret" not in info.value.message

    anyio.run(scenario)


def test_a_skill_the_view_is_not_offered_is_neither_listed_nor_read(tmp_path: Path) -> None:
    settings = build(tmp_path)

    async def scenario() -> None:
        async with connected(settings, persona="narrow") as client:  # whitelist: disk_* only
            uris = [r.uri for r in (await client.list_resources()).resources]
            assert uris == ["skill://disk_report/SKILL.md", "skill://disk_report/run.sh"]
            with pytest.raises(MCPError) as info:
                await client.read_resource("skill://release_guide/reference.md")
            assert info.value.code == RESOURCE_NOT_FOUND
        async with connected(settings, role=Role.VIEWER) as client:
            assert await client.read_resource("skill://disk_report/SKILL.md")
            with pytest.raises(MCPError):  # a viewer may never see a dangerous tool
                await client.read_resource("skill://wipe_disk/SKILL.md")

    anyio.run(scenario)


def test_resources_list_pages_with_a_cursor(tmp_path: Path) -> None:
    native = tmp_path / "native"
    for index in range(PAGE_SKILLS + 3):
        write_skill_md(native, f"s{index:03d}", {"name": f"s{index:03d}", "description": "d"})
    external = tmp_path / "external"
    external.mkdir()
    settings = make_settings(tmp_path, external, native_dirs=(str(native),))

    async def scenario() -> None:
        async with connected(settings) as client:
            first = await client.list_resources()
            assert len(first.resources) == PAGE_SKILLS
            assert first.next_cursor is not None
            second = await client.list_resources(cursor=first.next_cursor)
            assert [r.uri for r in second.resources] == [
                f"skill://s{i:03d}/SKILL.md" for i in range(PAGE_SKILLS, PAGE_SKILLS + 3)
            ]
            assert second.next_cursor is None
            with pytest.raises(MCPError):
                await client.list_resources(cursor="not-a-cursor")

    anyio.run(scenario)
