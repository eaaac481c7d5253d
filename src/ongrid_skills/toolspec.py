"""What the LLM sees (SPEC §7): the offered set, its exports, deferral and search.

Offered to a persona = tools its mode permits ∩ its whitelist − its blacklist − unavailable ones −
keyword-activated skills whose keywords do not occur in the user's message. Instructions skills
are not tools: they are named in the system prompt and read with ``read_skill``.

Above the deferral threshold (``ONGRID_TOOLBAG_DEFERRAL_THRESHOLD``, default 30) only the tools
marked ``activation: always`` are offered, plus ``search_skills``; tools found by a search are
*mounted* and offered on the following turns.

Permissions are not decided here: whether a persona may see a skill is the gate's
:func:`~ongrid_skills.governance.gate.persona_permits`. This module must never run a skill.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.governance.gate import persona_permits
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import DEFAULT_PERSONA, Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import SkillClass

FORMATS = ("openai", "anthropic", "mcp")
DEFAULT_DEFERRAL_THRESHOLD = 30
SEARCH_TOOL = "search_skills"
READ_TOOL = "read_skill"


def activated(skill: Skill, message: str | None) -> bool:
    """Keyword skills are active only when a keyword occurs in the message (case-insensitive)."""
    if skill.activation != "keyword":
        return True
    text = (message or "").lower()
    return any(keyword in text for keyword in skill.keywords)


def offered(
    registry: Registry, persona: Persona | None = None, message: str | None = None
) -> list[Skill]:
    """Every tool the persona may be shown for this message, sorted by name."""
    who = persona or DEFAULT_PERSONA
    return [
        s
        for s in registry.list()
        if s.kind != "instructions"
        and s.available
        and persona_permits(who, s)
        and activated(s, message)
    ]


def instructions(
    registry: Registry, persona: Persona | None = None, message: str | None = None
) -> list[Skill]:
    """The active instructions skills (named in the system prompt, read with read_skill)."""
    who = persona or DEFAULT_PERSONA
    return [
        s
        for s in registry.list()
        if s.kind == "instructions"
        and s.available
        and who.permits_tool(s.name)
        and activated(s, message)
    ]


def ranked_instructions(
    registry: Registry, persona: Persona | None = None, message: str | None = None
) -> list[Skill]:
    """:func:`instructions`, most relevant to the message first: those a keyword of the message
    activated, then by BM25 relevance to the message (as ``search_skills`` ranks), then by name.
    The system prompt lists from the top until its cap."""
    notes = instructions(registry, persona, message)
    if len(notes) < 2:
        return notes
    names = {s.name for s in notes}
    hits = (
        registry.search_index().search(message, len(notes), lambda s: s.name in names)
        if message
        else []
    )
    rank = {skill.name: index for index, (skill, _) in enumerate(hits)}
    return sorted(
        notes, key=lambda s: (s.activation != "keyword", rank.get(s.name, len(rank)), s.name)
    )


def description_of(skill: Skill) -> str:
    """The tool description a model reads: the description, then its ``when_to_use``."""
    if skill.when_to_use:
        return f"{skill.description}\n\nWhen to use: {skill.when_to_use}"
    return skill.description


def object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Providers want an object schema with properties: make sure both are there."""
    out = dict(schema)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out


def export(skill: Skill, fmt: str) -> dict[str, Any]:
    """One tool definition in a provider's format (``openai``, ``anthropic`` or ``mcp``)."""
    schema = object_schema(skill.schema)
    if fmt == "openai":
        return {
            "type": "function",
            "function": {
                "name": skill.name,
                "description": description_of(skill),
                "parameters": schema,
            },
        }
    if fmt == "anthropic":
        return {"name": skill.name, "description": description_of(skill), "input_schema": schema}
    if fmt == "mcp":
        tool = {
            "name": skill.name,
            "title": skill.name.replace("_", " "),
            "description": description_of(skill),
            "inputSchema": schema,
            "annotations": mcp_annotations(skill),
        }
        output = output_schema(skill)
        if output is not None:
            tool["outputSchema"] = output
        return tool
    raise ValueError(f"format must be one of {', '.join(FORMATS)}")


def mcp_annotations(skill: Skill) -> dict[str, Any]:
    """From the class; ``idempotentHint`` only when the skill declares ``idempotent: true``."""
    return {
        "title": skill.name.replace("_", " "),
        "readOnlyHint": skill.skill_class is SkillClass.SAFE,
        "destructiveHint": skill.skill_class is SkillClass.DANGEROUS,
        "idempotentHint": (skill.extra or {}).get("idempotent") is True,
        "openWorldHint": True,
    }


def output_schema(skill: Skill) -> dict[str, Any] | None:
    """A declared ``output_schema`` (object), advertised only for calls that always answer with
    the skill's result: a call that may wait for a confirmation answers with a pending approval
    instead, which the skill's output schema does not describe (strict clients validate it)."""
    declared = (skill.extra or {}).get("output_schema")
    if (
        isinstance(declared, dict)
        and declared.get("type") == "object"
        and skill.skill_class is SkillClass.SAFE
        and not skill.confirmation_required
    ):
        return declared
    return None


def export_all(skills: Iterable[Skill], fmt: str) -> list[dict[str, Any]]:
    return [export(s, fmt) for s in skills]


@dataclass
class Toolbag:
    """The tools of one agent run, turn by turn: deferral, search and mounting."""

    registry: Registry
    persona: Persona | None = None
    message: str | None = None
    threshold: int = DEFAULT_DEFERRAL_THRESHOLD
    mounted: set[str] = field(default_factory=set)

    def all_offered(self) -> list[Skill]:
        """Every tool the persona is offered for the message, deferred or not."""
        return offered(self.registry, self.persona, self.message)

    @property
    def deferred(self) -> bool:
        """Whether there are more tools than the threshold (the model must search)."""
        return len(self.all_offered()) > self.threshold

    def tools(self) -> list[Skill]:
        """The tools for the next turn."""
        every = self.all_offered()
        if len(every) <= self.threshold:
            return every
        keep = {SEARCH_TOOL, *self.mounted}
        return [s for s in every if s.activation == "always" or s.name in keep]

    def mount(self, names: Iterable[str]) -> list[str]:
        """Mount tools found by a search (only those the persona is offered at all)."""
        allowed = {s.name for s in self.all_offered()}
        added = [n for n in names if n in allowed and n not in self.mounted]
        self.mounted.update(added)
        return added

    def permits(self, name: str) -> bool:
        """A call by the model is accepted only for a tool offered this turn."""
        return any(s.name == name for s in self.tools())
