"""What the manifests of a plugin folder (a pack's root) tell the loader.

A pack's root may be laid out as a Claude Code plugin (``.claude-plugin/plugin.json``,
``commands/``, ``skills/``, ``hooks/``, ``.mcp.json``) or an openclaw plugin
(``openclaw.plugin.json``). :func:`plan_of` reads what matters for loading, without running
anything:

- **which skills load** — an openclaw manifest's ``skills`` (folders relative to the plugin's
  root) are the only places its ``SKILL.md`` and ``skill.json`` files load from; a skill file
  elsewhere gets a ``skill_not_listed`` warning. Without an openclaw manifest, every skill file
  under the root loads;
- **command folders** — ``commands/``, and the paths a Claude plugin manifest's ``commands``
  adds (:mod:`~ongrid_skills.skills.commands` loads them);
- **what never runs** — ``hooks/`` (and a manifest's ``hooks``) and ``.mcp.json`` (and a
  manifest's ``mcpServers``) are named in ``hooks_not_run`` / ``mcp_not_run`` warnings: this
  manager runs no plugin hook and starts no MCP server of a pack.

A manifest that cannot be read is reported by the packs layer at install; here it only means no
restriction is read from it. Paths leaving the root are ignored. It reads; it never writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import is_within
from ongrid_skills.skills.notices import HOOKS_NOT_RUN, MCP_NOT_RUN, Notice
from ongrid_skills.skills.skill_json import read_manifest

OPENCLAW_MANIFEST = "openclaw.plugin.json"
CLAUDE_MANIFEST = os.path.join(".claude-plugin", "plugin.json")
COMMANDS_DIR = "commands"
HOOKS_DIR = "hooks"
MCP_CONFIG = ".mcp.json"
_MAX_NAMED = 12


@dataclass(frozen=True, slots=True)
class PluginPlan:
    """How to load one pack root: ``skill_dirs`` the folders skills may come from (None:
    anywhere under the root), ``commands`` the command folders or files, ``notices`` the
    warnings (relative path, notice) about what is reported and never run."""

    root: str
    skill_dirs: tuple[str, ...] | None = None
    commands: tuple[str, ...] = ()
    notices: tuple[tuple[str, Notice], ...] = ()
    is_plugin: bool = False  # a Claude Code or openclaw plugin manifest is at the root

    def admits(self, real: str) -> bool:
        """Whether a skill file at canonical ``real`` may load."""
        if self.skill_dirs is None:
            return True
        return any(is_within(real, folder) for folder in self.skill_dirs)


def read_json(path: str) -> dict[str, Any] | None:
    """A manifest as a JSON object (read like a skill.json), or None when it is not one."""
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    try:
        return read_manifest(path)[1]
    except ManifestError:
        return None


def inside(root: str, relative: Any) -> str | None:
    """The canonical path of ``relative`` under ``root``, or None when it is no relative path
    or leaves the root (after every link is resolved)."""
    if not isinstance(relative, str) or not relative.strip() or os.path.isabs(relative):
        return None
    real = os.path.realpath(os.path.join(root, relative))
    return real if is_within(real, root) else None


def plan_of(root: str) -> PluginPlan:
    """The plan of the pack root ``root`` (canonical)."""
    notices: list[tuple[str, Notice]] = []
    skill_dirs: tuple[str, ...] | None = None
    claw = read_json(os.path.join(root, OPENCLAW_MANIFEST))
    if claw is not None:
        listed = claw.get("skills")
        entries = listed if isinstance(listed, list) else []
        skill_dirs = tuple(d for d in (inside(root, e) for e in entries) if d is not None)
    claude = read_json(os.path.join(root, CLAUDE_MANIFEST)) or {}
    commands = [os.path.join(root, COMMANDS_DIR)]
    extra = claude.get("commands")
    for entry in extra if isinstance(extra, list) else [extra]:
        found = inside(root, entry)
        if found is not None and found not in commands:
            commands.append(found)
    hooks = _hooks(root, claude.get("hooks"), claw)
    if hooks is not None:
        notices.append(hooks)
    mcp = _mcp(root, claude.get("mcpServers"))
    if mcp is not None:
        notices.append(mcp)
    existing = tuple(c for c in commands if os.path.exists(c) and not os.path.islink(c))
    plugin = claw is not None or os.path.isfile(os.path.join(root, CLAUDE_MANIFEST))
    return PluginPlan(root, skill_dirs, existing, tuple(notices), plugin)


def _hooks(root: str, declared: Any, claw: dict[str, Any] | None) -> tuple[str, Notice] | None:
    folder = os.path.join(root, HOOKS_DIR)
    has_folder = os.path.isdir(folder) and not os.path.islink(folder)
    claw_hooks = claw.get("hooks") if claw is not None else None
    if not has_folder and not declared and not claw_hooks:
        return None
    events: list[str] = []
    config = read_json(os.path.join(folder, "hooks.json")) if has_folder else None
    for source in (config, declared if isinstance(declared, dict) else None):
        table = source.get("hooks", source) if isinstance(source, dict) else None
        if isinstance(table, dict):
            events += [str(k) for k in table if str(k) not in events]
    where = [f"{HOOKS_DIR}/"] if has_folder else []
    if declared:
        where.append("plugin.json hooks")
    if claw_hooks:
        where.append(f"{OPENCLAW_MANIFEST} hooks")
    named = f" ({', '.join(events[:_MAX_NAMED])})" if events else ""
    message = (
        f"hooks{named} in {' and '.join(where)}: reported, never run (this manager runs no "
        "plugin hook)"
    )
    path = f"{HOOKS_DIR}/" if has_folder else CLAUDE_MANIFEST if declared else OPENCLAW_MANIFEST
    return path, Notice(HOOKS_NOT_RUN, "hooks", message)


def _mcp(root: str, declared: Any) -> tuple[str, Notice] | None:
    path = os.path.join(root, MCP_CONFIG)
    has_file = os.path.lexists(path)
    if not has_file and not declared:
        return None
    names: list[str] = []
    for source in (read_json(path) if has_file else None, declared):
        table = source.get("mcpServers", source) if isinstance(source, dict) else None
        if isinstance(table, dict):
            names += [str(k) for k in table if str(k) not in names]
    where = [MCP_CONFIG] if has_file else []
    if declared:
        where.append("plugin.json mcpServers")
    named = f" {', '.join(json.dumps(n) for n in names[:_MAX_NAMED])}" if names else ""
    message = (
        f"MCP servers{named} in {' and '.join(where)}: reported, never started (this manager "
        "starts no MCP server of a pack)"
    )
    return (MCP_CONFIG if has_file else CLAUDE_MANIFEST), Notice(MCP_NOT_RUN, "mcpServers", message)
