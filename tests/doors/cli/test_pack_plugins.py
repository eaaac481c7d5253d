"""Plugins through the console script: a Claude Code plugin and an openclaw plugin installed from
their folders (and a plain .tar), their warnings printed, their commands and declared fields
shown, and ``validate`` on a plugin folder naming its hooks and MCP servers."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from tests.doors.cli.test_pack_install import Data
from tests.support.packs import make_key
from tests.support.plugins import write_claude_plugin, write_openclaw_plugin


@pytest.fixture
def data(tmp_path: Path) -> Data:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    return Data(tmp_path, env, make_key(tmp_path / "keys", "author"))


def test_a_claude_plugin_installs_from_its_folder_with_its_warnings(data: Data) -> None:
    plugin = write_claude_plugin(data.base / "ops-toolkit")
    done = data.run("pack", "install", str(plugin))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "installed ops-toolkit@1.2.0",
        "skills: cmd_deploy_check, cmd_status, log_triage",
    ]
    assert "hooks (PreToolUse, SessionStart) in hooks/: reported, never run" in done.stderr
    assert "[mcp_not_run]" in done.stderr and 'MCP servers "github"' in done.stderr
    shown = data.json("show", "cmd_deploy_check")
    assert shown["kind"] == "instructions" and shown["category"] == "command"
    assert shown["extra"]["allowed-tools"].startswith("Bash(kubectl get:*)")
    assert shown["extra"]["argument-hint"] == ["service"]  # YAML reads [service] as a list


def test_validate_names_a_plugins_hooks_and_mcp_servers_with_their_codes(data: Data) -> None:
    plugin = write_claude_plugin(data.base / "ops-toolkit")
    done = data.run("validate", str(plugin))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert (
        f"{plugin}/hooks/:1:1: warning: hooks (PreToolUse, SessionStart) in hooks/: " in (lines[0])
    )
    assert lines[0].endswith("[hooks_not_run]")
    assert lines[1].startswith(f'{plugin}/.mcp.json:1:1: warning: MCP servers "github"')
    assert lines[1].endswith("[mcp_not_run]")
    broken = plugin / "commands" / "broken.md"
    broken.write_text("---\ndescription: [unclosed\n---\nBody\n")
    failed = data.run("validate", str(plugin))
    assert failed.returncode == 1
    assert any(
        line.startswith(f"{broken}:") and ": error: " in line for line in failed.stdout.splitlines()
    )


def test_an_openclaw_plugin_installs_with_its_declared_fields_shown(data: Data) -> None:
    plugin = write_openclaw_plugin(data.base / "voice-call")
    installed = data.json("pack", "install", str(plugin))
    assert (installed["id"], installed["version"]) == ("voice-call", "0.3.1")
    assert installed["pack"]["layout"] == "openclaw-plugin"
    assert installed["pack"]["skills"] == ["call_triage"]
    assert any("[skill_not_listed]" in w for w in installed["warnings"])
    shown = data.json("pack", "show", "voice-call")
    assert shown["declared"]["kind"] == "channel"
    assert shown["declared"]["uiHints"] == {"token": {"label": "API token", "sensitive": True}}


def test_a_plain_tar_of_a_plugin_installs_and_a_second_removal_is_a_no_op(data: Data) -> None:
    plugin = write_claude_plugin(data.base / "src" / "ops-toolkit")
    archive = data.base / "ops-toolkit.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(plugin, arcname="ops-toolkit")
    done = data.run("pack", "install", str(archive))
    assert done.returncode == 0, done.stderr
    assert "installed ops-toolkit@1.2.0" in done.stdout
    removed = data.json("pack", "remove", "ops-toolkit")
    assert (removed["action"], removed["removed"]) == ("remove", True)
    again = data.json("pack", "remove", "ops-toolkit")
    assert (again["action"], again["removed"]) == ("unchanged", False)
    assert json.dumps(again["warnings"]).count("not installed") == 1
