"""What an MCP caller is offered: the ``tools/list`` answer of one view (persona, role).

A view is the persona's offered set (:func:`ongrid_skills.toolspec.offered`), minus the classes
the caller's role may never run, each exported with :func:`toolspec.export` ``"mcp"``, plus the
door's own ``get_execution`` tool. Its fingerprint tells a connection that its view changed after
a reload.

This module never builds a skill's tool definition by hand (``tools/list`` and
``GET /v1/personas/{name}/tools?format=mcp`` must never differ) and never answers a permission
question itself: :mod:`ongrid_skills.governance.gate` does.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ongrid_skills import toolspec
from ongrid_skills.governance.gate import role_permits
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import DEFAULT_PERSONA
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import Role

GET_EXECUTION = "get_execution"
MAX_WAIT_SECONDS = 60

#: Whose offer a tool list shows: (persona name, role of the caller).
View = tuple[str, Role]

GET_EXECUTION_TOOL: dict[str, Any] = {
    "name": GET_EXECUTION,
    "title": "get execution",
    "description": (
        "Status and outcome of an ongrid-skills execution, e.g. one that waited for approval: "
        "the skill's verbatim result when it succeeded, the error envelope when it failed, its "
        "status while it waits or runs. `id` is the execution id or the approval id."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "execution id or approval id"},
            "wait_seconds": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_WAIT_SECONDS,
                "description": "wait up to this long for the call to end (default 0: answer now)",
            },
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    "annotations": {
        "title": "get execution",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}


def offered_tools(registry: Registry, persona: str | None, role: Role | None) -> list[Skill]:
    """The persona's offered tools (the tool-export function), minus classes the role may not run.

    No persona means the ``default`` persona (read-only), as everywhere a model is served.
    """
    who = registry.persona(persona or DEFAULT_PERSONA.name)
    skills = toolspec.offered(registry, who)
    return [s for s in skills if role_permits(role, s.skill_class) and s.name != GET_EXECUTION]


def view_tools(registry: Registry, view: View) -> list[dict[str, Any]]:
    """The ``tools/list`` entries of ``view`` in ``registry`` (none when the persona is gone)."""
    persona, role = view
    if persona not in registry.personas:
        return []
    tools = [toolspec.export(s, "mcp") for s in offered_tools(registry, persona, role)]
    return [*tools, GET_EXECUTION_TOOL]


def fingerprint(tools: list[dict[str, Any]]) -> str:
    """A digest of a tool list: equal digests, nothing for a client to re-list."""
    raw = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()
