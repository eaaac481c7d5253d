"""The console shows what a skill or a plugin declares: a tool's confirmation mode, the tools
this build cannot run, the original's ongrid fields, and an openclaw plugin's manifest fields."""

from __future__ import annotations

import html
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.runtime import open_packs
from tests.support.browser import Console, console_server
from tests.support.pack_review import press_confirm
from tests.support.plugins import write_claude_plugin, write_openclaw_plugin
from tests.support.skills import write_exec, write_skill_md


def native_skills(base: Path) -> Path:
    native = base / "native"
    write_exec(native / "peek", "ok.sh")
    write_skill_md(
        native,
        "peek",
        {
            "name": "peek",
            "description": "Peek.",
            "metadata": {"ongrid": {"edge_runtime": "python3.11"}},
            "tools": [{"name": "peek_self", "impl": "exec:ok.sh", "confirmation": "self-managed"}],
        },
    )
    write_skill_md(
        native,
        "promql",
        {
            "name": "promql_notes",
            "description": "PromQL from the original.",
            "tools": [{"name": "query_range", "impl": "go:prom.QueryRange"}],
        },
    )
    return native


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    base = tmp_path_factory.mktemp("declared")
    native = native_skills(base)
    with console_server(base, example_skills=False, native_dirs=(str(native),)) as served:
        yield served


def test_a_skill_page_shows_the_confirmation_mode_and_the_declared_fields(
    console: Console,
) -> None:
    with console.logged_in("vera") as client:
        page = html.unescape(client.get("/skills/peek_self").text)
    assert "<code>self-managed</code>: one confirmation for every call, whatever its class" in page
    assert '"metadata.ongrid.edge_runtime": "python3.11"' in page


def test_a_skill_whose_tools_this_build_lacks_lists_them(console: Console) -> None:
    with console.logged_in("vera") as client:
        page = html.unescape(client.get("/skills/promql_notes").text)
    assert "Tools this build cannot run" in page
    assert "<code>query_range</code> (<code>go:prom.QueryRange</code>): impl kind 'go'" in page


def test_the_packs_page_shows_an_openclaw_plugins_declared_fields(
    console: Console, tmp_path: Path
) -> None:
    packs = open_packs(console.settings, console.store)
    packs.install(str(write_openclaw_plugin(tmp_path / "voice-call")), "cli:ada")
    with console.logged_in("admin") as client:
        page = html.unescape(client.get("/packs").text)
    assert "Declared by the plugin" in page
    assert '"kind": "channel"' in page and '"channels": [' in page


def test_a_plugin_installed_from_the_page_names_its_hooks_and_mcp_servers(
    console: Console, tmp_path: Path
) -> None:
    plugin = write_claude_plugin(tmp_path / "ops-toolkit")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(plugin, arcname="ops-toolkit")
    with console.logged_in("admin") as client:
        token = console.csrf(client, "/packs")
        files = {"file": ("ops-toolkit.tar.gz", buffer.getvalue(), "application/gzip")}
        data = {"csrf": token, "allow_unsigned": "true"}
        review = client.post("/packs/upload", files=files, data=data)
        reviewed = html.unescape(review.text)
        assert "hooks (PreToolUse, SessionStart) in hooks/: reported, never run" in reviewed
        page = press_confirm(client, review)
    assert page.status_code == 200, page.text
    shown = html.unescape(page.text)
    assert "Installed ops-toolkit 1.2.0." in shown
    assert "hooks (PreToolUse, SessionStart) in hooks/: reported, never run" in shown
    assert 'MCP servers "github" in .mcp.json: reported, never started' in shown
