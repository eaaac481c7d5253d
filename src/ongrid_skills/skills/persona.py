"""Personas: agent profiles whose ``permission_mode`` gates the classes they may run (SPEC §5).

The persona file format and its validation. It never decides a call: the gate combines a
persona's mode and tool lists with the skill's class (:mod:`ongrid_skills.governance.gate`).

>>> p = Persona(name="x", description="d", when_to_use="w", disallowed_tools=("*_delete",))
>>> p.permits_tool("disk_delete"), p.permits_tool("disk_usage")
(False, True)
>>> Persona(name="y", description="d", when_to_use="w", tools=("probe_*",)).permits_tool("tail")
False
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.declared import cap_extra, cap_text
from ongrid_skills.skills.frontmatter import read_text, split_frontmatter
from ongrid_skills.skills.notices import Notice
from ongrid_skills.types import PermissionMode

KNOWN_KEYS = (
    "name",
    "description",
    "when_to_use",
    "permission_mode",
    "tools",
    "disallowed_tools",
    "max_turns",
    "model",
    "critical_reminder",
    "can_delegate",
)
DEFAULT_MAX_TURNS = 10
_NAME_RE = re.compile(r"[a-z0-9_]+")
_DASHED_RE = re.compile(r"[a-z0-9_-]+")


def pattern_matches(pattern: str, name: str) -> bool:
    """Exact names, ``prefix*``, ``*suffix`` and ``*`` (everything)."""
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return name.endswith(pattern[1:])
    return name == pattern


@dataclass(frozen=True, slots=True)
class Persona:
    """One agent profile: what it may run (mode, tool lists) and how it works (prompt, model)."""

    name: str
    description: str
    when_to_use: str
    permission_mode: PermissionMode = PermissionMode.READ_ONLY
    tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    max_turns: int = DEFAULT_MAX_TURNS
    model: str | None = None
    critical_reminder: str | None = None
    #: Offered the agent kernel's ``delegate`` tool (docs/agent.md, "Delegation").
    can_delegate: bool = False
    prompt: str = ""
    origin: str = "bundled"
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def permits_tool(self, name: str) -> bool:
        """Whitelist (when given) then blacklist; the blacklist wins."""
        if self.tools and not any(pattern_matches(p, name) for p in self.tools):
            return False
        return not any(pattern_matches(p, name) for p in self.disallowed_tools)

    def summary(self) -> dict[str, Any]:
        """The persona as the REST API lists it (the prompt left out)."""
        return {
            "name": self.name,
            "description": self.description,
            "when_to_use": self.when_to_use,
            "permission_mode": self.permission_mode.value,
            "tools": list(self.tools),
            "disallowed_tools": list(self.disallowed_tools),
            "max_turns": self.max_turns,
            "model": self.model,
            "critical_reminder": self.critical_reminder,
            "can_delegate": self.can_delegate,
            "origin": self.origin,
            "source": "file" if self.origin not in ("bundled", "stored") else self.origin,
            "extra": self.extra,
        }


DEFAULT_PERSONA = Persona(
    name="default",
    description="A careful read-only operator: observes, never changes anything.",
    when_to_use="When no other persona fits; safe skills only.",
    permission_mode=PermissionMode.READ_ONLY,
    prompt="You are a careful operations assistant. You may only observe systems.\n",
)

COORDINATOR_PERSONA = Persona(
    name="coordinator",
    description="Splits a task and hands each part to the specialist persona that fits it.",
    when_to_use="When a task spans several specialists, or you do not know which one fits.",
    permission_mode=PermissionMode.READ_ONLY,
    can_delegate=True,
    prompt=(
        "You are a coordinator of operations specialists. Work out what the task needs, hand "
        "each part to the specialist that fits it with the delegate tool (one clear, "
        "self-contained task per call: the specialist sees nothing else), then answer with "
        "what they found. Check facts yourself with your own tools when that is quicker. "
        "A specialist never gets a tool you could not use yourself.\n"
    ),
)

#: The personas every registry has (a persona file of the same name wins).
BUNDLED_PERSONAS: dict[str, Persona] = {p.name: p for p in (DEFAULT_PERSONA, COORDINATOR_PERSONA)}


def load_persona(path: str) -> Persona:
    """Read and build one persona file (Markdown with a YAML frontmatter)."""
    text = read_text(path)
    meta, body, _ = split_frontmatter(text, path)
    return build_persona(meta, body, path)


def build_persona(meta: dict[str, Any], body: str, path: str) -> Persona:
    """A Persona from its frontmatter and body; a bad key raises ManifestError naming it."""
    raw_name = meta.get("name")
    name = raw_name if isinstance(raw_name, str) else ""

    def fail(message: str, key: str) -> ManifestError:
        return ManifestError(message, path=path, kind="build", name=name, field=key)

    warnings: list[str] = []
    if not name:
        raise fail("name is required (a string)", "name")
    if not _NAME_RE.fullmatch(name):
        if not _DASHED_RE.fullmatch(name):
            raise fail(f'name "{name}" must match [a-z0-9_-]+', "name")
        warnings.append(f'name "{name}" has dashes; snake_case is recommended')
    for key in ("description", "when_to_use"):
        value = meta.get(key)
        if not isinstance(value, str) or not value.strip():
            raise fail(f"{key} is required (a non-blank string)", key)
    mode_raw = meta.get("permission_mode", PermissionMode.READ_ONLY.value)
    try:
        mode = PermissionMode(mode_raw)
    except ValueError:
        choices = ", ".join(m.value for m in PermissionMode)
        message = f"permission_mode must be one of {choices}, got {mode_raw!r}"
        raise fail(message, "permission_mode") from None
    tools = _names(meta.get("tools"), "tools", fail)
    disallowed = _names(meta.get("disallowed_tools"), "disallowed_tools", fail)
    max_turns = meta.get("max_turns", DEFAULT_MAX_TURNS)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 1 <= max_turns <= 1000:
        raise fail("max_turns must be an integer between 1 and 1000", "max_turns")
    for key in ("model", "critical_reminder"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            raise fail(f"{key} must be a string", key)
    can_delegate = meta.get("can_delegate", False)
    if not isinstance(can_delegate, bool):
        raise fail("can_delegate must be true or false", "can_delegate")
    extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS}
    warnings.extend(f"unknown key {k!r} is kept but not used" for k in extra)
    capped: list[Notice] = []  # stored fields are size-capped (skills/declared.py)
    description = cap_text(str(meta["description"]).strip(), "description", capped)
    when_to_use = cap_text(str(meta["when_to_use"]).strip(), "when_to_use", capped)
    reminder = meta.get("critical_reminder")
    if reminder is not None:
        reminder = cap_text(reminder, "critical_reminder", capped)
    extra = cap_extra(extra, capped)
    warnings.extend(notice.message for notice in capped)
    return Persona(
        name=name,
        description=description,
        when_to_use=when_to_use,
        permission_mode=mode,
        tools=tools,
        disallowed_tools=disallowed,
        max_turns=max_turns,
        model=meta.get("model"),
        critical_reminder=reminder,
        can_delegate=can_delegate,
        prompt=body.strip() + "\n" if body.strip() else "",
        origin=path,
        extra=extra,
        warnings=tuple(warnings),
    )


def _names(value: object, key: str, fail: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise fail(f"{key} must be a list of tool names or patterns", key)
    for pattern in value:
        if "*" in pattern.strip("*") or (pattern.count("*") > 1 and pattern != "*"):
            raise fail(f"{key} pattern {pattern!r}: only prefix* or *suffix are allowed", key)
    return tuple(value)
