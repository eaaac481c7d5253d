"""What the console shows of credentials, as plain data, and how it reads their forms.

- :class:`CredentialView`: one stored credential as the credentials page lists it (names, field
  kinds, bindings, who and when: the REST view, never a value nor a reference's text);
- :class:`SlotView`: one slot of a skill with what is bound to it (the skill's own binding, its
  pack's, or nothing), for the skill's page and its binder;
- :class:`PackSlot`: one slot name the skills of a pack declare, with the pack's binding;
- :func:`read_fields`: the field rows of the create and rotate forms → ``values`` and
  ``references``, refused with :class:`~ongrid_skills.errors.InvalidRequest` messages that
  name rows and fields, never what was typed in them.

This module reads; it must never change a credential nor decide who may look.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ongrid_skills.doors.web.forms import Form
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.skills.credential_slots import CredentialSlot
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry
from ongrid_skills.store.credentials import Binding, CredentialInfo

#: Rows of fields the create form offers (a credential with more fields: the CLI or REST, or
#: rotate, which adds fields).
CREATE_ROWS = 4
#: Rows a create or rotate form is read for at most (a row index above it is ignored).
MAX_ROWS = 32
_MAX_FIELD_NAME = 64
_MAX_VALUE = 65536
_MAX_REFERENCE = 4096


@dataclass(frozen=True, slots=True)
class BindingView:
    """Where a credential is bound: ``kind`` is ``skill`` or ``pack``, ``name`` which one."""

    kind: str
    name: str
    slot: str
    bound_by: str
    bound_at: float


@dataclass(frozen=True, slots=True)
class CredentialView:
    """One credential as listed: each field's kind (``stored``, ``file``, ``env``,
    ``command``), its bindings, who created and rotated it, and when it was last used."""

    name: str
    fields: list[tuple[str, str]]
    bindings: list[BindingView]
    created_by: str
    created_at: float
    rotated_by: str | None
    rotated_at: float | None
    last_used_at: float | None


def binding_view(binding: Binding) -> BindingView:
    kind, _, name = binding.target.partition(":")
    return BindingView(kind, name, binding.slot, binding.bound_by, binding.bound_at)


def credential_view(info: CredentialInfo) -> CredentialView:
    shown: dict[str, Any] = info.to_dict()  # the REST view: kinds, never a source
    return CredentialView(
        name=info.name,
        fields=sorted(shown["fields"].items()),
        bindings=[binding_view(b) for b in info.bound_to],
        created_by=info.created_by,
        created_at=info.created_at,
        rotated_by=info.rotated_by,
        rotated_at=info.rotated_at,
        last_used_at=info.last_used_at,
    )


@dataclass(frozen=True, slots=True)
class SlotView:
    """A slot of a skill: its declaration, the skill's own binding, its pack's (None when the
    skill is not a pack's or the pack has none), and the one its calls get (own first)."""

    slot: CredentialSlot
    own: str | None
    pack: str | None
    pack_bound: str | None

    @property
    def bound(self) -> str | None:
        return self.own or self.pack_bound

    @property
    def env_names(self) -> list[str]:
        return [name for name, _template in self.slot.env]

    @property
    def file_paths(self) -> list[str]:
        return [f"{f.path} (0{f.mode:o})" for f in self.slot.files]


def pack_of(skill: Skill) -> str | None:
    return skill.source.removeprefix("pack:") if skill.source.startswith("pack:") else None


def slot_views(skill: Skill, bindings: list[Binding]) -> list[SlotView]:
    """Each slot of ``skill`` with what is bound to it (the rule of ``Credentials.bound``)."""
    pack = pack_of(skill)
    own = {b.slot: b.credential for b in bindings if b.target == f"skill:{skill.name}"}
    shared = {b.slot: b.credential for b in bindings if pack and b.target == f"pack:{pack}"}
    return [SlotView(s, own.get(s.slot), pack, shared.get(s.slot)) for s in skill.credentials]


@dataclass(frozen=True, slots=True)
class PackSlot:
    """A slot name declared by skills of a pack: its labels, those skills, the pack's binding."""

    slot: str
    labels: list[str]
    skills: list[str]
    bound: str | None


def pack_slots(
    registry: Registry, pack_id: str, skill_names: list[str], bindings: list[Binding]
) -> list[PackSlot]:
    """The slots the pack's skills declare, by name, with what is bound to the pack's slot."""
    found: dict[str, tuple[list[str], list[str]]] = {}
    for name in skill_names:
        skill = registry.skills.get(name)
        for slot in skill.credentials if skill is not None else ():
            labels, skills = found.setdefault(slot.slot, ([], []))
            if slot.label not in labels:
                labels.append(slot.label)
            skills.append(name)
    bound = {b.slot: b.credential for b in bindings if b.target == f"pack:{pack_id}"}
    return [
        PackSlot(slot, labels, skills, bound.get(slot))
        for slot, (labels, skills) in sorted(found.items())
    ]


def read_fields(form: Form, *, keep_empty: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The rows ``field_N`` (a field name), ``value_N`` (a value) and ``reference_N``
    (``file:…``, ``env:…``, ``command:…``) → (values, references). A row without a name and
    without anything typed is skipped; a named row with neither is skipped when
    ``keep_empty`` (rotate: the field keeps its source), refused otherwise (create)."""
    values: dict[str, str] = {}
    references: dict[str, str] = {}
    for index in range(MAX_ROWS):
        name = (form.get(f"field_{index}") or "").strip()
        value = form.get(f"value_{index}") or ""
        reference = (form.get(f"reference_{index}") or "").strip()
        row = f"field row {index + 1}"
        if not name:
            if value or reference:
                raise InvalidRequest(f"{row} has a value or a reference but no field name")
            continue
        if len(name) > _MAX_FIELD_NAME:
            raise InvalidRequest(f"{row}: a field name is at most {_MAX_FIELD_NAME} characters")
        if name in values or name in references:
            raise InvalidRequest(f"field {name} is given twice")
        if value and reference:
            raise InvalidRequest(f"field {name} is given both a value and a reference: one")
        if len(value) > _MAX_VALUE or len(reference) > _MAX_REFERENCE:
            raise InvalidRequest(f"field {name}: the value or reference is too long")
        if value:
            values[name] = value
        elif reference:
            references[name] = reference
        elif not keep_empty:
            raise InvalidRequest(f"field {name} needs a value or a reference")
    return values, references


def field_names(form: Form) -> list[str]:
    """The field names a refused create form named, to show it again without what was typed
    in its value and reference boxes (those are never echoed)."""
    names = [(form.get(f"field_{index}") or "").strip() for index in range(CREATE_ROWS)]
    return [name[:_MAX_FIELD_NAME] for name in names]


__all__ = [
    "CREATE_ROWS",
    "BindingView",
    "CredentialView",
    "PackSlot",
    "SlotView",
    "credential_view",
    "field_names",
    "pack_slots",
    "read_fields",
    "slot_views",
]
