"""A persona written at run time (``POST /v1/personas``, the console's editor): its document.

The document is the persona file in JSON: the frontmatter's fields by the same names
(``name``, ``description``, ``when_to_use``, ``permission_mode``, ``tools``,
``disallowed_tools``, ``max_turns``, ``model``, ``critical_reminder``, ``can_delegate``) plus
``prompt``, the Markdown body. It is built by the very builder of persona files
(:func:`~ongrid_skills.skills.persona.build_persona`), so every rule and message is theirs; on
top of them, what a file only earns a warning for is refused here, since whoever writes through
an API can fix it at once: an unknown field, a dashed name, a text over the size cap (a file's
is cut). Names are at most :data:`MAX_NAME_CHARS`, the prompt at most :data:`MAX_PROMPT_CHARS`.

>>> persona_from_document({"name": "night", "description": "d", "when_to_use": "w"}).origin
'stored'
>>> persona_from_document({"name": "x", "description": "d", "when_to_use": "w", "mode": "r"})
Traceback (most recent call last):
...
ongrid_skills.errors.InvalidPersona: unknown field 'mode' (the fields are: name, description, \
when_to_use, permission_mode, tools, disallowed_tools, max_turns, model, critical_reminder, \
can_delegate, prompt)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ongrid_skills.errors import InvalidPersona, ManifestError
from ongrid_skills.skills.declared import MAX_TEXT_CHARS
from ongrid_skills.skills.persona import KNOWN_KEYS, Persona, build_persona

FIELDS = (*KNOWN_KEYS, "prompt")
MAX_NAME_CHARS = 64
MAX_PROMPT_CHARS = 64 * 1024
#: The ``origin`` of every persona built from a stored document.
STORED = "stored"


def persona_from_document(document: Mapping[str, Any], *, name: str | None = None) -> Persona:
    """The Persona a document describes, or :class:`InvalidPersona` naming the field at fault.

    ``name``: the name the document must have (an update names it in its path); the
    document's own ``name`` may then be left out, but not differ."""
    if not isinstance(document, Mapping):
        raise InvalidPersona("a persona is a JSON object of its fields")
    unknown = [key for key in document if key not in FIELDS]
    if unknown:
        listed = ", ".join(FIELDS)
        raise InvalidPersona(f"unknown field {unknown[0]!r} (the fields are: {listed})", unknown[0])
    meta = {key: value for key, value in document.items() if key != "prompt"}
    if name is not None:
        given = meta.setdefault("name", name)
        if given != name:
            raise InvalidPersona(
                f"the name {given!r} is not {name!r}: a persona is renamed by creating the new "
                "one and deleting the old",
                "name",
            )
    raw_name = meta.get("name")
    if isinstance(raw_name, str) and len(raw_name) > MAX_NAME_CHARS:
        raise InvalidPersona(f"name is longer than {MAX_NAME_CHARS} characters", "name")
    prompt = document.get("prompt", "")
    if prompt is None:
        prompt = ""
    if not isinstance(prompt, str):
        raise InvalidPersona("prompt must be a string (the Markdown body)", "prompt")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InvalidPersona(
            f"prompt is {len(prompt)} characters, at most {MAX_PROMPT_CHARS}", "prompt"
        )
    for key in ("description", "when_to_use", "critical_reminder"):
        value = meta.get(key)
        if isinstance(value, str) and key != "critical_reminder":
            value = value.strip()  # as the builder keeps them
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise InvalidPersona(f"{key} is longer than {MAX_TEXT_CHARS} characters", key)
    try:
        persona = build_persona(meta, prompt, STORED)
    except ManifestError as exc:
        raise InvalidPersona(exc.message, exc.field) from None
    if persona.warnings:  # a dashed name (the texts and unknown keys are refused above)
        raise InvalidPersona(persona.warnings[0].replace("recommended", "required here"), "name")
    return persona


def document_of(persona: Persona) -> dict[str, Any]:
    """The document that builds ``persona`` (every field, defaults written out)."""
    return {
        "name": persona.name,
        "description": persona.description,
        "when_to_use": persona.when_to_use,
        "permission_mode": persona.permission_mode.value,
        "tools": list(persona.tools),
        "disallowed_tools": list(persona.disallowed_tools),
        "max_turns": persona.max_turns,
        "model": persona.model,
        "critical_reminder": persona.critical_reminder,
        "can_delegate": persona.can_delegate,
        "prompt": persona.prompt,
    }


def document_digest(document: Mapping[str, Any]) -> str:
    """SHA-256 of a document's canonical JSON: what the audit log records of its text."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def source_of(persona: Persona) -> str:
    """Where a persona comes from: ``bundled``, ``stored`` (the database) or ``file``."""
    if persona.origin in ("bundled", STORED):
        return persona.origin
    return "file"


@dataclass(frozen=True, slots=True)
class StoredPersona:
    """One row of the stored personas: its document and who wrote it when."""

    name: str
    document: dict[str, Any]
    created_by: str
    created_at: float
    updated_by: str | None = None
    updated_at: float | None = None


class PersonaRecords(Protocol):
    """Where stored personas live (the store implements it: ``store/personas.py``). Each
    change is one transaction with its audit entry, and changes the generation."""

    def generation(self) -> str | None:
        """A value that changes with every change of any stored persona (None: never one)."""

    def all(self) -> list[StoredPersona]: ...

    def create(self, name: str, document: dict[str, Any], actor: str) -> None: ...

    def update(self, name: str, document: dict[str, Any], actor: str) -> None: ...

    def delete(self, name: str, actor: str) -> None: ...


__all__ = [
    "FIELDS",
    "MAX_NAME_CHARS",
    "MAX_PROMPT_CHARS",
    "STORED",
    "PersonaRecords",
    "StoredPersona",
    "document_digest",
    "document_of",
    "persona_from_document",
    "source_of",
]
