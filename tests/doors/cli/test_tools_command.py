"""The doors print what the functions compute: `ongrid-skills tools/list/show` and the REST route.

The CLI runs as real processes (one per invocation), all started at once to keep this fast.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.skills.registry import Registry
from ongrid_skills.toolspec import export_all, offered
from tests.support.processes import CLI
from tests.support.server import make_settings, running_app
from tests.support.skills import executable_dir, load, write_exec, write_persona, write_skill_md

OPENCLAW = {"homepage": "https://example.com/pdf", "requires": {"bins": ["pdftotext"]}}


@dataclass
class Tree:
    native: Path
    personas: Path

    def registry(self, *, bundled: bool = False) -> Registry:
        registry, _ = load([self.native], personas=[self.personas], bundled=bundled)
        return registry


def build_tree(base: Path) -> Tree:
    native = base / "native"
    tools = [
        {
            "name": "check_port",
            "impl": "exec:run.sh",
            "class": "read",
            "description": "Check a port.",
            "when_to_use": "When a service may be down.",
            "schema": {"type": "object", "properties": {"port": {"type": "integer"}}},
        },
        {"name": "restart_unit", "impl": "exec:run.sh", "class": "write"},
        {"name": "wipe_disk", "impl": "exec:run.sh", "class": "destructive"},
    ]
    write_skill_md(native, "ops", {"name": "ops", "description": "Ops tools.", "tools": tools})
    write_exec(native / "ops", "run.sh")
    write_skill_md(
        native,
        "disk",
        {
            "name": "disk_help",
            "description": "Disk tools.",
            "activation": {"mode": "keyword", "keywords": ["disk"]},
            "tools": [{"name": "disk_tool", "impl": "exec:run.sh"}],
        },
    )
    write_exec(native / "disk", "run.sh")
    claude = (
        "name: pdf-helper\n"
        "description: Extract text and tables from PDF files.\n"
        "allowed-tools: Read, Bash\n"
        "license: Apache-2.0\n"
        f"metadata:\n  openclaw: {json.dumps(OPENCLAW)}\n"
    )
    write_skill_md(native, "pdf-helper", claude, "# PDF helper\nUse scripts/extract.py.\n")
    write_exec(native / "pdf-helper", "scripts/extract.py", "#!/usr/bin/env python3\n")
    personas = base / "personas"
    write_persona(personas, "reader", "read-only")
    write_persona(personas, "signer", "dual-sign-required")
    return Tree(native, personas)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    return build_tree(tmp_path_factory.mktemp("tools-cli"))


#: name → (argv, bundled catalogue on)
CALLS: dict[str, tuple[list[str], bool]] = {
    "openai": (["tools", "--persona", "signer", "--format", "openai"], True),
    "anthropic": (
        ["tools", "--persona", "signer", "--format", "anthropic", "-m", "the DISK is full"],
        True,
    ),
    "mcp": (["tools", "--persona", "reader", "--format", "mcp"], True),
    "list": (["list", "--json", "-v"], False),  # -v: the loader lines, warnings included
    "show": (["show", "pdf_helper"], False),
}


@pytest.fixture(scope="module")
def outputs(tree: Tree) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run every CLI call of this module concurrently; name → finished process."""
    # pdf-helper's openclaw block requires pdftotext on PATH: provide one, so it is available.
    base = {
        "PATH": executable_dir(tree.native.parent, "pdftotext"),
        "HOME": os.environ.get("HOME", "/root"),
        "ONGRID_SKILLS_NATIVE_DIRS": str(tree.native),
        "ONGRID_PERSONAS_DIRS": str(tree.personas),
        "ONGRID_DATA_DIR": str(tree.native.parent / "data"),
    }
    procs = {
        name: subprocess.Popen(
            [CLI, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**base, "ONGRID_BUNDLED_SKILLS": "1" if bundled else "0"},
        )
        for name, (argv, bundled) in CALLS.items()
    }
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def printed(tools: list[dict[str, Any]]) -> str:
    return json.dumps(tools, indent=2, ensure_ascii=False) + "\n"


# ---- tools -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "persona", "fmt", "message"),
    [
        ("openai", "signer", "openai", None),
        ("anthropic", "signer", "anthropic", "the DISK is full"),
        ("mcp", "reader", "mcp", None),
    ],
)
def test_tools_prints_exactly_what_the_export_function_returns(
    tree: Tree,
    outputs: dict[str, subprocess.CompletedProcess[str]],
    call: str,
    persona: str,
    fmt: str,
    message: str | None,
) -> None:
    done = outputs[call]
    assert done.returncode == 0, done.stderr
    registry = tree.registry(bundled=True)
    expected = export_all(offered(registry, registry.persona(persona), message), fmt)
    assert done.stdout == printed(expected)


def test_tools_output_follows_the_persona_and_the_message(
    outputs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    openai = [t["function"]["name"] for t in json.loads(outputs["openai"].stdout)]
    anthropic = [t["name"] for t in json.loads(outputs["anthropic"].stdout)]
    mcp = [t["name"] for t in json.loads(outputs["mcp"].stdout)]
    assert {"check_port", "restart_unit", "wipe_disk", "search_skills", "probe_tcp"} <= set(openai)
    assert "disk_tool" not in openai  # keyword skill, no message
    assert "disk_tool" in anthropic  # "DISK" occurs in the message
    assert "check_port" in mcp
    assert not {"restart_unit", "wipe_disk"} & set(mcp)  # read-only persona
    for names in (openai, anthropic, mcp):
        assert "pdf_helper" not in names  # instructions skills are not tools


# ---- list and show ---------------------------------------------------------------------------
def test_list_json_shows_a_claude_code_skill_as_an_instructions_skill(
    outputs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    done = outputs["list"]
    assert done.returncode == 0, done.stderr
    items = {item["name"]: item for item in json.loads(done.stdout)["items"]}
    assert items["pdf_helper"]["kind"] == "instructions"
    assert items["pdf_helper"]["category"] == "instructions"
    assert items["pdf_helper"]["available"] is True
    assert items["check_port"]["kind"] == "subprocess"
    assert items["wipe_disk"]["class"] == "dangerous"
    assert "warning" in done.stderr and 'normalised to "pdf_helper"' in done.stderr


def test_show_prints_the_unknown_keys_it_kept(
    outputs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    done = outputs["show"]
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "kind:            instructions" in lines
    assert 'allowed-tools:   "Read, Bash"' in lines
    assert 'license:         "Apache-2.0"' in lines
    openclaw = [line for line in lines if line.startswith("metadata.openclaw:")]
    assert len(openclaw) == 1
    assert json.loads(openclaw[0].removeprefix("metadata.openclaw:")) == OPENCLAW


# ---- the REST route --------------------------------------------------------------------------
def test_the_persona_tools_route_returns_the_same_export(tmp_path: Path, skills_root: Path) -> None:
    tree = build_tree(tmp_path / "tree")
    settings = make_settings(
        tmp_path,
        skills_root,
        native_dirs=(str(tree.native),),
        persona_dirs=(str(tree.personas),),
    )
    registry = tree.registry()
    with running_app(settings) as server:
        for persona, fmt, message in [
            ("signer", "anthropic", None),
            ("signer", "openai", "disk is full"),
            ("reader", "mcp", None),
        ]:
            params = {"format": fmt, **({"message": message} if message else {})}
            response = server.call("GET", f"/v1/personas/{persona}/tools", "vera", params=params)
            assert response.status_code == 200, response.text
            skills = offered(registry, registry.persona(persona), message)
            assert response.json() == {
                "format": fmt,
                "tools": export_all(skills, fmt),
                "total": len(skills),
            }
        default = server.call("GET", "/v1/personas/signer/tools")
        assert default.json()["format"] == "openai"
        bad = server.call("GET", "/v1/personas/signer/tools", params={"format": "gemini"})
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == "invalid_request"
        missing = server.call("GET", "/v1/personas/nobody/tools", params={"format": "mcp"})
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"
