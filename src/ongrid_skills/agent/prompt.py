"""The system prompt of one agent turn, built from the persona and what the turn offers.

In order: the persona's body (or the default persona's), the instructions skills the model may
follow (it reads one with ``read_skill``), the catalogue of personas it may delegate to (a persona
offered ``delegate``, :mod:`.delegation`), the deferral note when more tools exist than are
listed, and the persona's ``critical_reminder`` last, where a model weighs it most. Pure text: it
must never read files, the store or a registry; the loop hands it what the turn already holds.

The instructions listing is bounded (``ONGRID_PROMPT_LISTING_MAX_CHARS``, default 4000
characters; one entry at most :data:`MAX_ENTRY_CHARS`): the loop hands the skills most relevant
first, the listing keeps as many as fit and tells the model how many more ``search_skills``
finds. A collection of 900 skills would otherwise put ~115,000 characters in every turn.
"""

from __future__ import annotations

from ongrid_skills.settings import DEFAULT_PROMPT_LISTING_CHARS
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import DEFAULT_PERSONA, Persona
from ongrid_skills.toolspec import READ_TOOL, SEARCH_TOOL

#: Told to the model when the turn's tools are deferred (only some listed, the rest searchable).
DEFERRAL_NOTE = (
    f"More tools exist than are listed: call {SEARCH_TOOL} to find one; the tools it "
    "finds become callable on your next turn."
)
LISTING_HEADER = (
    f"Instructions skills you may follow (read one with {READ_TOOL} before acting on it):"
)
MAX_ENTRY_CHARS = 400


def instructions_listing(notes: list[Skill], max_chars: int | None = None) -> str:
    """One line per instructions skill: its name, description and when to use it — as many as
    fit in ``max_chars`` (None: all), then how many more there are."""
    lines = [LISTING_HEADER]
    used = len(LISTING_HEADER)
    for skill in notes:
        entry = _entry(skill)
        if max_chars is not None and used + 1 + len(entry) > max_chars:
            break
        lines.append(entry)
        used += 1 + len(entry)
    rest = len(notes) - (len(lines) - 1)
    if rest:
        lines.append(
            f"({rest} more are not listed: find them with {SEARCH_TOOL}, "
            f"then read one with {READ_TOOL}.)"
        )
    return "\n".join(lines)


def _entry(skill: Skill) -> str:
    when = f" When to use: {skill.when_to_use}" if skill.when_to_use else ""
    entry = " ".join(f"- {skill.name}: {skill.description}{when}".split())
    return entry if len(entry) <= MAX_ENTRY_CHARS else entry[: MAX_ENTRY_CHARS - 1] + "…"


def system_prompt(
    persona: Persona,
    notes: list[Skill],
    deferred: bool,
    listing_chars: int = DEFAULT_PROMPT_LISTING_CHARS,
    delegates: str | None = None,
) -> str:
    """Persona body + the instructions skills (most relevant first, up to ``listing_chars``)
    + the personas it may delegate to (``delegates``, already bounded) + deferral hint + the
    critical reminder."""
    parts = [persona.prompt.strip() or DEFAULT_PERSONA.prompt.strip()]
    if notes:
        parts.append(instructions_listing(notes, listing_chars))
    if delegates:
        parts.append(delegates)
    if deferred:
        parts.append(DEFERRAL_NOTE)
    if persona.critical_reminder:
        parts.append(f"CRITICAL REMINDER: {persona.critical_reminder.strip()}")
    return "\n\n".join(parts)
