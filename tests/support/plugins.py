"""Plugin folders laid out as their ecosystems lay them out, written file by file.

- :func:`write_claude_plugin` — a Claude Code plugin: ``.claude-plugin/plugin.json``,
  ``commands/`` (one with frontmatter, one nested without), ``skills/<name>/SKILL.md``,
  ``agents/`` (a Claude sub-agent), ``hooks/hooks.json`` and ``.mcp.json``;
- :func:`write_openclaw_plugin` — an openclaw plugin: ``openclaw.plugin.json`` with its
  ``skills`` list and the fields openclaw reads (``kind``, ``channels``, ``configSchema``,
  ``uiHints``), a listed skill whose ``metadata.openclaw`` is one line of JSON text, a skill
  it does not list, and the plugin's code (never run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEPLOY_CHECK = """---
description: Check that a service is ready to deploy
allowed-tools: Bash(kubectl get:*), Bash(kubectl rollout status:*)
argument-hint: [service]
---
Check the service $ARGUMENTS before a deploy:

1. `kubectl get deploy $ARGUMENTS` shows every replica ready.
2. No alert fires for it.
"""

ROLLOUT_STATUS = """# Show the rollout status of a deployment

Run `kubectl rollout status deploy/$ARGUMENTS` and report what it says.
"""

LOG_TRIAGE = """---
name: log-triage
description: Triage a service's error logs.
---
Read the last errors first.
"""

HOOKS = {
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./hooks/guard.sh"}]}
        ],
        "SessionStart": [{"hooks": [{"type": "command", "command": "./hooks/hello.sh"}]}],
    }
}
MCP = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "@example/github-mcp"]}}}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_claude_plugin(
    root: Path, name: str = "ops-toolkit", version: str = "1.2.0", **manifest: Any
) -> Path:
    """A Claude Code plugin folder at ``root``."""
    body = {
        "name": name,
        "version": version,
        "description": "Deploy checks for the platform team",
        "author": {"name": "Platform SRE"},
        "keywords": ["deploy", "kubernetes"],
        **manifest,
    }
    _write(root / ".claude-plugin" / "plugin.json", json.dumps(body, indent=2) + "\n")
    _write(root / "commands" / "deploy-check.md", DEPLOY_CHECK)
    _write(root / "commands" / "rollout" / "status.md", ROLLOUT_STATUS)
    _write(root / "skills" / "log-triage" / "SKILL.md", LOG_TRIAGE)
    agent = "---\nname: reviewer\ndescription: Reviews a change.\ntools: Read, Grep\n---\nReview.\n"
    _write(root / "agents" / "reviewer.md", agent)
    _write(root / "hooks" / "hooks.json", json.dumps(HOOKS, indent=2) + "\n")
    _write(root / "hooks" / "guard.sh", '#!/bin/sh\ntouch "$(dirname "$0")/../hook-ran"\n')
    _write(root / ".mcp.json", json.dumps(MCP, indent=2) + "\n")
    return root


CALL_TRIAGE = """---
name: call-triage
description: Triage a failed voice call.
metadata: {"openclaw": "{\\"requires\\": {\\"env\\": [\\"VOICE_TOKEN\\"]}, \\"emoji\\": \\"📞\\"}"}
---
Look up the call by its id, then read its trace.
"""

UNLISTED = """---
name: scratch-notes
description: Notes the plugin ships but does not list.
---
Not for the model.
"""


def write_openclaw_plugin(root: Path, plugin_id: str = "voice-call", **manifest: Any) -> Path:
    """An openclaw plugin folder at ``root``, listing one of its two skills."""
    body = {
        "id": plugin_id,
        "name": "Voice Call",
        "version": "0.3.1",
        "description": "Place and triage voice calls",
        "kind": "channel",
        "channels": ["voice"],
        "providers": ["twilio"],
        "configSchema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"token": {"type": "string"}},
        },
        "uiHints": {"token": {"label": "API token", "sensitive": True}},
        "skills": ["skills/call-triage"],
        **manifest,
    }
    _write(root / "openclaw.plugin.json", json.dumps(body, indent=2) + "\n")
    _write(root / "skills" / "call-triage" / "SKILL.md", CALL_TRIAGE)
    _write(root / "skills" / "scratch-notes" / "SKILL.md", UNLISTED)
    _write(root / "index.ts", "export default { id: 'voice-call', register() {} };\n")
    _write(root / "package.json", json.dumps({"name": "voice-call", "type": "module"}) + "\n")
    return root
