"""Personas stored in the database, merged into the registry (SPEC §19, docs/personas.md).

:class:`StoredPersonas` is composed once per manager over the store's records
(:class:`~ongrid_skills.skills.persona_doc.PersonaRecords`) and the registry the files built.
Doors call ``create``/``update``/``delete`` (admins; blocking: run them in a worker thread);
the manager's ``registry`` is :meth:`StoredPersonas.overlay` of the files' registry.

- **Files win.** A persona of a file, a pack or the bundled ones is read-only here: creating a
  stored one of its name, or editing or deleting it, is a Conflict naming where it comes from.
  A file added later with a stored persona's name hides that one (it is listed as shadowed, and
  may still be deleted).
- **Replicas.** Every change writes a new *generation* (a random value in the store, in the
  change's transaction). A process reads it at most every :data:`GENERATION_TTL_SECONDS` when
  its registry is read, and reloads the stored personas only when it changed; the runtime's
  :func:`~ongrid_skills.runtime.watch_personas` also reads it on that beat, so an edit made on
  another replica reaches this one's MCP clients (``list_changed``) without any traffic here.
  The process that made a change sees it at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ongrid_skills.errors import Conflict, InvalidPersona, NotFound
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.persona_doc import (
    PersonaRecords,
    StoredPersona,
    document_of,
    persona_from_document,
    source_of,
)
from ongrid_skills.skills.registry import Registry

LOG = logging.getLogger("ongrid_skills.personas")
#: How old the generation read at a registry read may be (an edit on another replica shows
#: within this).
GENERATION_TTL_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored persona as the console lists it: the row, the persona it builds (None when
    its document no longer builds, with ``problem``), and whether a file's persona hides it."""

    row: StoredPersona
    persona: Persona | None
    problem: str | None = None
    shadowed_by: str | None = None


class StoredPersonas:
    """The stored personas of one process: the edits, and the registry they are merged into."""

    def __init__(
        self,
        records: PersonaRecords,
        files: Callable[[], Registry],
        *,
        ttl: float = GENERATION_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``files``: the registry the files built (without stored personas)."""
        self.records = records
        self.files = files
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._checked: float | None = None  # when the generation was last read
        self._generation: str | None = None
        self._loaded: tuple[str | None, dict[str, Persona], list[Entry]] = (None, {}, [])
        self._overlay: tuple[Registry, str | None, Registry] | None = None

    # ---- changes (admins) ------------------------------------------------------------------
    def create(self, document: Mapping[str, Any], actor: str) -> Persona:
        """Store a new persona; Conflict when its name is taken (by a file or a stored one)."""
        persona = persona_from_document(document)
        self._writable(persona.name, creating=True)
        self.records.create(persona.name, document_of(persona), actor)
        self.refresh(force=True)
        return persona

    def update(self, name: str, document: Mapping[str, Any], actor: str) -> Persona:
        """Replace a stored persona's whole document (the fields left out take their
        defaults, as in a file)."""
        persona = persona_from_document(document, name=name)
        self._writable(name, creating=False)
        self.records.update(name, document_of(persona), actor)
        self.refresh(force=True)
        return persona

    def delete(self, name: str, actor: str) -> None:
        """Delete a stored persona, a shadowed one included (a file's persona of its name
        stays); Conflict for a file or bundled persona with no stored one behind it."""
        try:
            self.records.delete(name, actor)
        except NotFound:
            self._writable(name, creating=False)  # a file or bundled persona: say so
            raise
        self.refresh(force=True)

    def _writable(self, name: str, *, creating: bool) -> None:
        found = self.files().personas.get(name)
        if found is not None:
            where = "bundled" if source_of(found) == "bundled" else f"from {found.origin}"
            doing = "create a stored persona named" if creating else "change"
            raise Conflict(
                f"cannot {doing} {name!r}: the persona {name!r} is {where}, and file and "
                "bundled personas are read-only here"
                + (" (choose another name)" if creating else " (edit its file)")
            )

    # ---- reading ---------------------------------------------------------------------------
    def refresh(self, *, force: bool = False) -> bool:
        """Read the generation (when ``force``, or older than the TTL) and, when it changed,
        the stored personas; True when they changed."""
        now = self.clock()
        checked = self._checked
        if not force and checked is not None and now - checked < self.ttl:
            return False
        with self._lock:
            generation = self.records.generation()
            self._checked = now
            if generation == self._loaded[0] and checked is not None:
                return False
            rows = self.records.all() if generation is not None else []
            self._loaded = (generation, *self._build(rows))
            return True

    def _build(self, rows: list[StoredPersona]) -> tuple[dict[str, Persona], list[Entry]]:
        personas: dict[str, Persona] = {}
        entries = []
        for row in rows:
            try:
                persona = persona_from_document(row.document, name=row.name)
            except InvalidPersona as exc:  # written by another version's rules: left out
                LOG.warning("stored persona %r is left out: %s", row.name, exc.message)
                entries.append(Entry(row, None, exc.message))
                continue
            personas[row.name] = persona
            entries.append(Entry(row, persona))
        return personas, entries

    @property
    def generation(self) -> str | None:
        """The generation of the stored personas this process holds now."""
        return self._loaded[0]

    def entries(self) -> list[Entry]:
        """Every stored persona, by name (built, refused or shadowed by a file's), read afresh."""
        self.refresh(force=True)
        files = self.files().personas
        out = []
        for entry in sorted(self._loaded[2], key=lambda e: e.row.name):
            shadow = files.get(entry.row.name)
            if shadow is None or entry.persona is None:
                out.append(entry)
            else:
                out.append(Entry(entry.row, entry.persona, shadowed_by=shadow.origin))
        return out

    def stored(self, name: str) -> Entry:
        """The stored persona ``name`` (NotFound when none is stored of that name)."""
        for entry in self.entries():
            if entry.row.name == name:
                return entry
        raise NotFound(f"no stored persona named {name!r}")

    def overlay(self, registry: Registry) -> Registry:
        """``registry`` with the stored personas its files do not name; the same object when
        none is stored, rebuilt only when the registry or the stored personas changed."""
        self.refresh()
        generation, personas, _entries = self._loaded
        if not personas:
            return registry
        cached = self._overlay
        if cached is not None and cached[0] is registry and cached[1] == generation:
            return cached[2]
        merged = {**personas, **registry.personas}  # a file's persona wins a name
        made = registry.with_personas(merged)
        self._overlay = (registry, generation, made)
        return made


__all__ = ["GENERATION_TTL_SECONDS", "Entry", "StoredPersonas"]
