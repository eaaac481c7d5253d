"""The Skill record held by a registry: what a tool is, where it runs, how it is gated."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from ongrid_skills.errors import Violation
from ongrid_skills.paths import Fingerprint, content_digest, fingerprint
from ongrid_skills.skills.credential_slots import CredentialSlot
from ongrid_skills.skills.sandbox import SandboxSpec
from ongrid_skills.skills.schemas import EMPTY_OBJECT_SCHEMA, validate_args, validator_for
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS, SkillClass

#: Where a skill runs (SPEC §17): on the manager (the default), or on the host an edge worker
#: runs on (``host``; SKILL.md also says ``edge``). Without a fleet, a host skill runs locally.
SCOPE_MANAGER = "manager"
SCOPE_HOST = "host"
_SCOPES = {"manager": SCOPE_MANAGER, "host": SCOPE_HOST, "edge": SCOPE_HOST}
#: The argument the manager adds to a host skill's schema: where the call runs.
HOST_ARG = "host"


def parse_scope(value: object) -> str | None:
    """``manager``, ``host`` or ``edge`` (the same as ``host``), any case; None otherwise.

    >>> parse_scope("Edge"), parse_scope("pod")
    ('host', None)
    """
    return _SCOPES.get(value.strip().lower()) if isinstance(value, str) else None


def scope_problem(scope: str, schema: dict[str, Any], kind: str) -> str | None:
    """Why a skill of this scope, schema and kind cannot be loaded, or None."""
    if scope != SCOPE_HOST:
        return None
    if kind == "instructions":
        return "scope host needs a tool that runs (an exec: or builtin: impl), not instructions"
    properties = schema.get("properties")
    if isinstance(properties, dict) and HOST_ARG in properties:
        return (
            f"a host-scoped skill cannot declare an argument named {HOST_ARG!r}: the manager "
            "adds it (the host the call runs on)"
        )
    return None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a host-scoped skill that edge workers announce may run (built by the fleet).

    ``definition_hash`` is the definition offered (held by the most online hosts), ``hosts`` the
    online hosts holding it (the ``host`` enum), ``variants`` every definition seen under the
    name with its hosts, the offered one first: two definitions are shown, never merged.
    """

    definition_hash: str
    hosts: tuple[str, ...]
    variants: tuple[tuple[str, tuple[str, ...]], ...]
    #: Slot -> credential name the offered definition's hosts bind (names only, SPEC §18).
    credentials: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": list(self.hosts),
            "definitions": [
                {"definition_hash": h, "hosts": list(hs), "offered": h == self.definition_hash}
                for h, hs in self.variants
            ],
        }


@dataclass(frozen=True, slots=True)
class SpawnTarget:
    """Where a subprocess skill runs: its canonical entry under its canonical root."""

    entry: str
    root: str
    folder: str
    env_allow: tuple[str, ...] = ()
    shown_root: str = ""
    # The entry file as loaded: (dev, ino, size, mtime, ctime); see paths.fingerprint.
    fingerprint: Fingerprint | None = None
    confine: str | None = None  # a folder the entry must also stay in (a SKILL.md's exec:)

    def changed_on_disk(self) -> bool:
        """True when the entry file is no longer the one that was loaded."""
        try:
            return fingerprint(os.stat(self.entry)) != self.fingerprint
        except OSError:
            return True

    def content_digest(self) -> str | None:
        """SHA-256 of the entry's bytes while it is the file loaded; None once it changed."""
        if self.fingerprint is None:
            return None
        return content_digest(self.entry, self.fingerprint)


@dataclass(frozen=True, slots=True)
class PreviewSpec:
    """A skill's preview (SPEC §20), loaded by ``skills/preview_spec.py``: args merged over the
    caller's, or another entry of its folder; its own timeout."""

    timeout_seconds: int
    args: dict[str, Any] | None = None
    target: SpawnTarget | None = None

    def merged(self, args: Any) -> Any:
        """The args the preview runs with: ``args`` merged over the caller's (an object)."""
        if self.args is None or not isinstance(args, dict):
            return args
        return {**args, **self.args}

    def to_dict(self) -> dict[str, Any]:
        """What the definition hash covers (the entry by path; its bytes are hashed apart)."""
        return {
            "args": self.args,
            "entry": self.target.entry if self.target else None,
            "fingerprint": list(self.target.fingerprint or ()) if self.target else None,
            "timeout": self.timeout_seconds,
        }


@dataclass(slots=True, eq=False)
class Skill:
    name: str
    description: str
    skill_class: SkillClass = SkillClass.SAFE
    category: str = "external"
    kind: str = "subprocess"  # subprocess | native | instructions
    source: str = "external"  # external | builtin | native | pack:<id>
    schema: dict[str, Any] = field(default_factory=lambda: dict(EMPTY_OBJECT_SCHEMA))
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    when_to_use: str | None = None
    available: bool = True
    unavailable_reason: str | None = None
    confirmation_required: bool = False
    #: A SKILL.md tool's ``confirmation`` as declared (required, not-required, self-managed).
    confirmation: str | None = None
    origin: str = ""  # the manifest file it came from
    target: SpawnTarget | None = None
    builtin: Any = None  # an in-process callable (see ongrid_skills.builtins.base)
    activation: str | None = None  # always | keyword | None (not declared)
    keywords: tuple[str, ...] = ()
    group: str | None = None  # the SKILL.md a native tool belongs to
    extra: dict[str, Any] | None = None
    # SKILL.md skills: the name as written, the other names it answers to (skills/aliases.py)
    # and the canonical folder of its SKILL.md, whose files read_skill_file serves.
    declared_name: str | None = None
    aliases: tuple[str, ...] = ()
    base_dir: str | None = None
    scope: str = SCOPE_MANAGER
    placement: Placement | None = None  # set on the manager for skills edge workers announce
    # The credentials it needs (SPEC §18): slots an admin binds a stored credential to.
    credentials: tuple[CredentialSlot, ...] = ()
    #: An instructions skill whose tools this build cannot run: (tool, impl, why) of each.
    unavailable_tools: tuple[tuple[str, str, str], ...] = ()
    # What the kernel lets a call of it touch (SPEC §20); None: the operator's default alone.
    sandbox: SandboxSpec | None = None
    # How it runs itself without effect, for the signers of its requests (SPEC §20).
    preview: PreviewSpec | None = None
    _validator: jsonschema_rs.Validator | None = None
    _load_hash: str | None = None

    def validate(self, args: object) -> list[Violation]:
        if self._validator is None:
            self._validator = validator_for(self.schema)
        return validate_args(self.schema, args, self._validator)

    @property
    def load_hash(self) -> str:
        """SHA-256 of the definition as loaded, the entry known by its fingerprint only.

        Cheap (nothing is read): what a reload compares to say which skills changed.
        """
        if self._load_hash is None:
            target = self.target
            body: dict[str, Any] = {
                "name": self.name,
                "class": self.skill_class.value,
                "schema": self.schema,
                "timeout": self.timeout_seconds,
                "kind": self.kind,
                "source": self.source,
                "entry": target.entry if target else None,
                "builtin": _qualname(self.builtin),
                "env_allow": list(target.env_allow) if target else None,
                "fingerprint": list(target.fingerprint or ()) if target else None,
                "origin": self.origin,
            }
            if self.scope != SCOPE_MANAGER:  # absent for the default: older hashes still hold
                body["scope"] = self.scope
            if self.credentials:  # likewise: a skill without slots keeps its hash
                body["credentials"] = [slot.to_dict() for slot in self.credentials]
            if self.sandbox is not None:  # likewise: approvals bind what it may touch
                body["sandbox"] = self.sandbox.to_dict()
            if self.preview is not None:  # likewise: a skill without a preview keeps its hash
                body["preview"] = self.preview.to_dict()
            raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
            self._load_hash = hashlib.sha256(raw).hexdigest()
        return self._load_hash

    @property
    def definition_hash(self) -> str:
        """SHA-256 of everything that defines the call, the entry's bytes included: approvals
        are bound to it. The entry is read on first use (a request, a run), not at load; each
        use checks the file is still the one loaded (one ``stat``), so an entry rewritten in
        place gives another hash (with its mtime put back too: the ctime tells)."""
        if self.placement is not None:  # announced by workers: the offered definition's hash
            return self.placement.definition_hash
        if self.target is None:
            return self.load_hash
        content = self.target.content_digest()  # None: changed since load, or unreadable
        plan = self.preview.target if self.preview is not None else None
        if plan is not None:  # a preview entry's bytes are part of the definition too
            content = f"{content}:{plan.content_digest()}"
        return hashlib.sha256(f"{self.load_hash}:{content}".encode()).hexdigest()

    def summary(self) -> dict[str, Any]:
        """The SkillSummary of the REST API (SPEC §9), with ``extra``: the fields its author
        declared that we keep and show (``license``, ``allowed-tools``, ``metadata.openclaw``…)."""
        return {
            "name": self.name,
            "description": self.description,
            "class": self.skill_class.value,
            "category": self.category,
            "kind": self.kind,
            "source": self.source,
            "schema": self.schema,
            "timeout_seconds": self.timeout_seconds,
            "available": self.available,
            "unavailable_reason": self.unavailable_reason,
            "when_to_use": self.when_to_use,
            "extra": self.extra,
            "scope": self.scope,
            **(
                {"credentials": [s.to_dict() for s in self.credentials]} if self.credentials else {}
            ),
            **({"placement": self.placement.to_dict()} if self.placement else {}),
            **({"confirmation": self.confirmation} if self.confirmation else {}),
            **(
                {
                    "unavailable_tools": [
                        {"name": tool, "impl": impl, "reason": why}
                        for tool, impl, why in self.unavailable_tools
                    ]
                }
                if self.unavailable_tools
                else {}
            ),
            **({"sandbox": self.sandbox.to_dict()} if self.sandbox else {}),
        }


def _qualname(fn: Any) -> str | None:
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
