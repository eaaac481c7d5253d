"""Plugins over /v1/packs on the composed app: a Claude Code plugin uploaded as a plain .tar
(its commands served as skills, its hooks and MCP servers named in the answer and in
/v1/loader), an openclaw plugin with its declared fields, a removal retried, and owner/repo
refused while no forge is configured."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.plugins import write_claude_plugin, write_openclaw_plugin
from tests.support.server import Server, make_settings, running_app


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("plugins")
    (base / "skills").mkdir()
    with running_app(make_settings(base, base / "skills", pack_keep_seconds=0)) as running:
        yield running


def plain_tar(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=folder.name)
    return buffer.getvalue()


def upload(server: Server, name: str, data: bytes) -> httpx.Response:
    files = {"file": (name, data, "application/x-tar")}
    return server.call("POST", "/v1/packs", files=files, data={"allow_unsigned": "true"})


def test_a_claude_plugin_uploaded_as_a_plain_tar_serves_its_commands_and_names_its_hooks(
    server: Server, tmp_path: Path
) -> None:
    plugin = write_claude_plugin(tmp_path / "ops-toolkit")
    answer = upload(server, "ops-toolkit.tar", plain_tar(plugin))
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["pack"]["skills"] == ["cmd_deploy_check", "cmd_status", "log_triage"]
    assert any(w.endswith("[hooks_not_run]") for w in body["warnings"])
    assert any(w.endswith("[mcp_not_run]") for w in body["warnings"])
    skill = server.call("GET", "/v1/skills/cmd_deploy_check", "vera").json()
    assert skill["extra"]["allowed-tools"].startswith("Bash(kubectl get:*)")
    assert skill["kind"] == "instructions" and skill["source"] == "pack:ops-toolkit"
    loader = server.call("GET", "/v1/loader").json()
    codes = {(w["code"], Path(w["path"]).name) for w in loader["warnings"]}
    assert {("hooks_not_run", "hooks"), ("mcp_not_run", ".mcp.json")} <= codes

    removed = server.call("DELETE", "/v1/packs/ops-toolkit")
    assert removed.status_code == 200 and removed.json()["removed"] is True
    again = server.call("DELETE", "/v1/packs/ops-toolkit")
    assert again.status_code == 200, again.text  # idempotent, not 404
    assert (again.json()["action"], again.json()["removed"]) == ("unchanged", False)


def test_an_openclaw_plugin_shows_its_declared_fields(server: Server, tmp_path: Path) -> None:
    plugin = write_openclaw_plugin(tmp_path / "voice-call")
    answer = upload(server, "voice-call.tar", plain_tar(plugin))
    assert answer.status_code == 201, answer.text
    assert answer.json()["pack"]["layout"] == "openclaw-plugin"
    shown = server.call("GET", "/v1/packs/voice-call").json()
    assert shown["skills"] == ["call_triage"]
    assert shown["declared"]["channels"] == ["voice"]
    assert shown["declared"]["configSchema"]["additionalProperties"] is False


def test_owner_repo_is_refused_while_no_forge_is_configured(server: Server) -> None:
    answer = server.call("POST", "/v1/packs", json={"source": "acme/ops-pack@v1"})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"
