"""The system prompt of one agent turn, built from the persona and what the turn offers.

In order: the persona's body (or the default persona's), the instructions skills the model may
follow (it reads one with ``read_skill``), the deferral note when more tools exist than are
listed, and the persona's ``critical_reminder`` last, where a model weighs it most. Pure text: it
must never read files, the store or a registry; the loop hands it what the turn already holds.
"""

from __future__ import annotations

from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import DEFAULT_PERSONA, Persona
from ongrid_skills.toolspec import SEARCH_TOOL

#: Told to the model when the turn's tools are deferred (only some listed, the rest searchable).
DEFERRAL_NOTE = (
    f"More tools exist than are listed: call {SEARCH_TOOL} to find one; the tools it "
    "finds become callable on your next turn."
)


def instructions_listing(notes: list[Skill]) -> str:
    """One line per instructions skill: its name, description and when to use it."""
    lines = ["Instructions skills you may follow (read one with read_skill before acting on it):"]
    for skill in notes:
        when = f" When to use: {skill.when_to_use}" if skill.when_to_use else ""
        lines.append(f"- {skill.name}: {skill.description}{when}")
    return "\n".join(lines)


def system_prompt(persona: Persona, notes: list[Skill], deferred: bool) -> str:
    """Persona body + the active instructions skills + deferral hint + the critical reminder."""
    parts = [persona.prompt.strip() or DEFAULT_PERSONA.prompt.strip()]
    if notes:
        parts.append(instructions_listing(notes))
    if deferred:
        parts.append(DEFERRAL_NOTE)
    if persona.critical_reminder:
        parts.append(f"CRITICAL REMINDER: {persona.critical_reminder.strip()}")
    return "\n\n".join(parts)
