"""The MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``) drives ``ongrid-skills mcp``."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.support.mcp import World
from tests.support.processes import venv_bin

PACKAGE = "@modelcontextprotocol/inspector"


def inspector(world: World, *method: str) -> subprocess.CompletedProcess[str]:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip(f"npx is not installed: the MCP Inspector CLI ({PACKAGE}) cannot run")
    env = [arg for k, v in world.env.items() if k != "PATH" for arg in ("-e", f"{k}={v}")]
    argv = [npx, "-y", PACKAGE, "--cli", *env, venv_bin("ongrid-skills"), "-q", "mcp", *method]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.skip(f"{PACKAGE} could not be fetched and started within 240 s")
    if proc.returncode != 0 and ("npm error" in proc.stderr or "npm ERR!" in proc.stderr):
        last = proc.stderr.strip().splitlines()[-1:]
        pytest.skip(f"{PACKAGE} could not be fetched from the npm registry: {last}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_the_mcp_inspector_cli_lists_and_calls_the_tools(world: World) -> None:
    listed = json.loads(inspector(world, "--method", "tools/list").stdout)
    names = [tool["name"] for tool in listed["tools"]]
    assert "verbatim" in names and "get_execution" in names and "mutate" not in names

    called = inspector(world, "--method", "tools/call", "--tool-name", "verbatim").stdout
    result = json.loads(called)
    assert result["isError"] is False
    assert result["content"][0]["text"] == '{"b": 1,   "a": [1, 2]}'
    assert result["structuredContent"] == {"b": 1, "a": [1, 2]}
