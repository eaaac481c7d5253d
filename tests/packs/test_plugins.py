"""Claude Code and openclaw plugins installed as packs, laid out as their ecosystems lay them
out: commands become keyword instructions skills, an openclaw manifest decides which skills
load and keeps its other fields, hooks and MCP servers are reported and never run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

import ongrid_skills
from ongrid_skills.errors import PackError
from ongrid_skills.packs.contents import inspect_pack
from ongrid_skills.packs.layout import Layout, declared_fields
from ongrid_skills.packs.source import staged
from ongrid_skills.runtime import load_registry
from ongrid_skills.toolspec import instructions
from tests.packs import test_install
from tests.packs.test_install import World
from tests.support.plugins import write_claude_plugin, write_openclaw_plugin

world = test_install.world  # the installer on a real data dir and store


def test_a_claude_plugins_commands_become_keyword_instructions_skills(world: World) -> None:
    outcome = world.install(write_claude_plugin(world.base / "ops-toolkit"))
    assert (outcome.pack_id, outcome.version) == ("ops-toolkit", "1.2.0")
    assert outcome.record is not None
    assert outcome.record.skills == ("cmd_deploy_check", "cmd_status", "log_triage")
    registry = load_registry(settings=world.settings, log=lambda _line: None)
    check = registry.get("cmd_deploy_check")
    assert (check.kind, check.activation, check.source) == (
        "instructions",
        "keyword",
        "pack:ops-toolkit",
    )
    assert check.keywords == ("/deploy-check", "deploy-check", "deploy_check")
    assert check.description == "Check that a service is ready to deploy"
    assert check.extra is not None
    assert check.extra["allowed-tools"] == "Bash(kubectl get:*), Bash(kubectl rollout status:*)"
    assert check.extra["command"] == "/deploy-check"
    status = registry.get("cmd_status")  # commands/rollout/status.md, no frontmatter
    assert status.description == "Show the rollout status of a deployment"
    assert [s.name for s in instructions(registry, message="please /deploy-check api")] == [
        "cmd_deploy_check",
        "log_triage",
    ]
    assert "cmd_deploy_check" not in [s.name for s in instructions(registry, message="hello")]


def test_a_commands_body_is_read_through_read_skill(world: World) -> None:
    world.install(write_claude_plugin(world.base / "ops-toolkit"))
    settings = dataclasses.replace(world.settings, bundled_skills=True)
    registry = load_registry(settings=settings, log=lambda _line: None)
    read = asyncio.run(ongrid_skills.execute(registry, "read_skill", {"name": "/deploy-check"}))
    assert read.result["name"] == "cmd_deploy_check"
    assert read.result["body"].startswith("Check the service $ARGUMENTS before a deploy:")
    assert read.result["extra"]["allowed-tools"].startswith("Bash(kubectl get:*)")
    plain = asyncio.run(ongrid_skills.execute(registry, "read_skill", {"name": "cmd_status"}))
    assert plain.result["body"].startswith("# Show the rollout status of a deployment")


def test_hooks_and_mcp_servers_install_with_warnings_naming_them_and_never_run(
    world: World,
) -> None:
    plugin = write_claude_plugin(world.base / "ops-toolkit")
    outcome = world.install(plugin)
    hooks = [w for w in outcome.warnings if "[hooks_not_run]" in w]
    mcp = [w for w in outcome.warnings if "[mcp_not_run]" in w]
    assert hooks == [
        "hooks/:1:1: warning: hooks (PreToolUse, SessionStart) in hooks/: reported, never run "
        "(this manager runs no plugin hook) [hooks_not_run]"
    ]
    assert mcp == [
        '.mcp.json:1:1: warning: MCP servers "github" in .mcp.json: reported, never started '
        "(this manager starts no MCP server of a pack) [mcp_not_run]"
    ]
    registry = load_registry(settings=world.settings, log=lambda _line: None)
    codes = {(w.code, Path(w.path).name) for w in registry.report.warnings}
    assert {("hooks_not_run", "hooks"), ("mcp_not_run", ".mcp.json")} <= codes
    installed = world.home.version_dir("ops-toolkit", "1.2.0")
    assert (installed / "hooks" / "guard.sh").is_file()
    assert not (plugin / "hook-ran").exists() and not (installed / "hook-ran").exists()


def test_an_openclaw_plugin_installs_with_its_manifest_and_only_its_listed_skills(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICE_TOKEN", raising=False)
    plugin = write_openclaw_plugin(world.base / "voice-call")
    outcome = world.install(plugin)
    assert (outcome.pack_id, outcome.version) == ("voice-call", "0.3.1")
    assert outcome.record is not None
    assert outcome.record.layout == Layout.OPENCLAW.value == "openclaw-plugin"
    assert outcome.record.skills == ("call_triage",)
    assert outcome.record.description == "Place and triage voice calls"
    assert any("[skill_not_listed]" in w and "scratch-notes" in w for w in outcome.warnings)
    registry = load_registry(settings=world.settings, log=lambda _line: None)
    assert "scratch_notes" not in registry
    triage = registry.get("call_triage")
    # metadata.openclaw written as JSON text gates the skill like the object form does
    assert (triage.available, triage.unavailable_reason) == (
        False,
        "missing environment variables: VOICE_TOKEN",
    )
    assert triage.extra is not None and triage.extra["metadata.openclaw"]["emoji"] == "📞"
    monkeypatch.setenv("VOICE_TOKEN", "t0k")
    assert (
        load_registry(settings=world.settings, log=lambda _line: None).get("call_triage").available
    )
    folder = world.home.version_dir("voice-call", "0.3.1")
    declared = declared_fields(folder)
    assert declared is not None
    assert declared["kind"] == "channel" and declared["channels"] == ["voice"]
    assert declared["configSchema"]["properties"] == {"token": {"type": "string"}}
    assert declared["uiHints"]["token"]["sensitive"] is True


@pytest.mark.parametrize(
    ("skills", "message"),
    [
        (["../elsewhere"], "skills entry '../elsewhere' leaves the plugin's root"),
        (["skills/absent"], "skills entry 'skills/absent' is not a folder of the plugin"),
        ("skills", "skills must be a list of folders relative to the plugin's root"),
    ],
)
def test_an_openclaw_manifest_listing_skills_it_does_not_hold_is_refused(
    tmp_path: Path, skills: object, message: str
) -> None:
    plugin = write_openclaw_plugin(tmp_path / "voice-call", skills=skills)
    with pytest.raises(PackError) as info, staged(plugin):
        pass
    assert [p.message for p in info.value.problems] == [message]


def test_an_openclaw_id_that_is_no_pack_id_is_made_one_with_a_warning(tmp_path: Path) -> None:
    plugin = write_openclaw_plugin(tmp_path / "p", plugin_id="Voice Call")
    with staged(plugin) as pack:
        assert pack.manifest.id == "voice-call"
        contents = inspect_pack(pack.detected)
    assert contents.ok, contents.errors
    assert any("is not a pack id" in p.message for p in contents.warnings)
    coded = {p.code for p in contents.warnings if p.code}
    assert coded == {"name_normalised", "skill_not_listed"}  # call-triage → call_triage
    assert json.loads((plugin / "openclaw.plugin.json").read_text())["id"] == "Voice Call"
