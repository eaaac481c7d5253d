"""The credential commands of every door, and what one call of a skill is given.

:class:`Credentials` is composed once per process over the store's repository, the key and the
operator's rules. Doors call ``create``/``rotate``/``delete``/``all``/``bind``/``unbind``;
the manager asks :meth:`Credentials.missing` whether a skill can be offered and
:meth:`Credentials.injection` for the env entries, files and values to mask of one call.

Binding: a credential is bound to ``slot`` of one skill (``skill:<name>``) or to ``slot`` of
every skill of a pack (``pack:<id>``); a skill's own binding wins over its pack's.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ongrid_skills.credentials import calldir
from ongrid_skills.credentials.cipher import CredentialKey, load_key
from ongrid_skills.credentials.sources import (
    SourceRules,
    parse_reference,
    read_value,
    too_short,
)
from ongrid_skills.errors import (
    ConfigError,
    CredentialMissing,
    CredentialUnreadable,
    InvalidRequest,
    NotFound,
)
from ongrid_skills.execution.grant import Grant
from ongrid_skills.execution.masking import Masker
from ongrid_skills.settings import Settings
from ongrid_skills.skills.credential_slots import FileInjection
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry
from ongrid_skills.store.credentials import Binding, CredentialInfo, CredentialRepo

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
#: How long the bindings read for the catalogue are reused (another replica's bind shows
#: within this); a call always reads them afresh.
BINDINGS_TTL_SECONDS = 2.0


@dataclass(slots=True)
class Injection:
    """What one call is given: env entries, files for ``$CREDENTIALS_DIRECTORY``, and every
    value to mask; ``slots`` maps each slot to the credential bound to it (names only)."""

    env: dict[str, str] = field(default_factory=dict)
    files: list[FileInjection] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    slots: dict[str, str] = field(default_factory=dict)

    def masker(self) -> Masker | None:
        return Masker.of(self.secrets)


def target_of(skill: str | None = None, pack: str | None = None) -> str:
    """``skill:<name>`` or ``pack:<id>``: what a binding is for (exactly one of them)."""
    if (skill is None) == (pack is None):
        raise InvalidRequest("bind to a skill or to a pack (one of them)")
    return f"skill:{skill}" if skill is not None else f"pack:{pack}"


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise InvalidRequest(
            f"credential name {name!r} must be 1-64 of a-z 0-9 . _ - (starting with a letter "
            "or digit)"
        )
    return name


class Credentials:
    """The credential store of one process (the manager's or a worker's data dir)."""

    def __init__(
        self,
        repo: CredentialRepo,
        *,
        data_dir: str,
        key_file: str | None = None,
        rules: SourceRules | None = None,
        runtime_dir: str | None = None,
    ) -> None:
        self.repo = repo
        self.data_dir = data_dir
        self.key_file = key_file
        self.rules = rules or SourceRules()
        self.calls_dir = calldir.base_dir(runtime_dir, data_dir)
        self._key: CredentialKey | None = None
        self._bindings: tuple[float, list[Binding]] | None = None
        # The last overlay: the registry it was made of, the bindings it saw, what it made.
        self._overlay: tuple[Registry, list[Binding], Registry] | None = None
        self._needing: tuple[Registry, list[Skill]] | None = None

    # ---- changes (admins) ----------------------------------------------------------------------
    def create(
        self,
        name: str,
        values: Mapping[str, str],
        references: Mapping[str, str],
        actor: str,
    ) -> CredentialInfo:
        """A new credential with ``values`` (sealed) and ``references`` (``file:…``, ``env:…``,
        ``command:…``); at least one field."""
        check_name(name)
        if not values and not references:
            raise InvalidRequest(f"credential {name!r} needs at least one field")
        self.repo.create(name, self._sources(name, values, references), actor)
        return self.repo.get(name)

    def rotate(
        self, name: str, values: Mapping[str, str], references: Mapping[str, str], actor: str
    ) -> CredentialInfo:
        """New values or references for some fields; the next call uses them."""
        if not values and not references:
            raise InvalidRequest("rotate needs at least one field")
        self.repo.rotate(name, self._sources(name, values, references), actor)
        return self.repo.get(name)

    def delete(self, name: str, actor: str) -> None:
        self.repo.delete(name, actor)

    def all(self) -> list[CredentialInfo]:
        return self.repo.all()

    def get(self, name: str) -> CredentialInfo:
        return self.repo.get(name)

    def bind(
        self,
        credential: str,
        slot: str,
        actor: str,
        *,
        skill: Skill | None = None,
        pack: str | None = None,
    ) -> Binding | None:
        """Bind ``credential`` to ``slot`` of ``skill`` (which must declare it) or of every
        skill of ``pack``; return the binding it replaced."""
        if skill is not None:
            declared = [s.slot for s in skill.credentials]
            if slot not in declared:
                offered = ", ".join(declared) or "none"
                raise NotFound(f"skill {skill.name} has no credential slot {slot!r} ({offered})")
        target = target_of(skill.name if skill is not None else None, pack)
        previous = self.repo.bind(credential, target, slot, actor)
        self._bindings = None
        return previous

    def unbind(
        self, slot: str, actor: str, *, skill: str | None = None, pack: str | None = None
    ) -> Binding:
        previous = self.repo.unbind(target_of(skill, pack), slot, actor)
        self._bindings = None
        return previous

    def bindings(self, *, fresh: bool = False) -> list[Binding]:
        cached = self._bindings
        now = time.monotonic()
        if fresh or cached is None or now - cached[0] > BINDINGS_TTL_SECONDS:
            cached = self._bindings = (now, self.repo.bindings())
        return cached[1]

    def overlay(self, registry: Registry) -> Registry:
        """``registry`` with every skill that has an unbound slot unavailable (``needs
        credential for slot <slot>``): not offered to models, refused by the gate. The same
        object when no skill declares a slot; rebuilt only when the registry or the bindings
        changed."""
        needing = self._needing
        if needing is None or needing[0] is not registry:
            needing = self._needing = (
                registry,
                [s for s in registry.skills.values() if s.credentials and s.available],
            )
        if not needing[1]:
            return registry
        bindings = self.bindings()
        cached = self._overlay
        if cached is not None and cached[0] is registry and cached[1] == bindings:
            return cached[2]
        changed = {}
        for skill in needing[1]:
            reason = self.missing(skill, bindings)
            if reason is not None:
                changed[skill.name] = dataclasses.replace(
                    skill, available=False, unavailable_reason=reason
                )
        merged = {**registry.skills, **changed}
        made = registry.with_skills(merged, inherit=registry) if changed else registry
        self._overlay = (registry, bindings, made)
        return made

    # ---- a skill's calls ---------------------------------------------------------------------
    def bound(self, skill: Skill, bindings: list[Binding] | None = None) -> dict[str, str | None]:
        """Each slot of ``skill`` → the credential bound to it (its own, else its pack's)."""
        found = self.bindings() if bindings is None else bindings
        own = {b.slot: b.credential for b in found if b.target == f"skill:{skill.name}"}
        pack = skill.source.removeprefix("pack:") if skill.source.startswith("pack:") else None
        shared = {b.slot: b.credential for b in found if pack and b.target == f"pack:{pack}"}
        return {s.slot: own.get(s.slot) or shared.get(s.slot) for s in skill.credentials}

    def names(self, skill: Skill) -> dict[str, str | None]:
        """Each slot of ``skill`` → the credential bound to it now (bindings read afresh)."""
        return self.bound(skill, self.bindings(fresh=True))

    def missing(self, skill: Skill, bindings: list[Binding] | None = None) -> str | None:
        """``needs credential for slot <slot>`` when a slot of ``skill`` is unbound, else None."""
        if not skill.credentials:
            return None
        for slot, credential in self.bound(skill, bindings).items():
            if credential is None:
                return f"needs credential for slot {slot}"
        return None

    async def injection(self, skill: Skill) -> Injection | None:
        """What a call of ``skill`` gets now (values read at call time): None for a skill
        without slots. Raises CredentialMissing (a slot unbound, a credential gone or without a
        field the slot names) and :class:`CredentialUnreadable` (a value that cannot be had now)."""
        if not skill.credentials:
            return None
        bound = self.bound(skill, self.bindings(fresh=True))
        injection = Injection()
        for slot in skill.credentials:
            name = bound[slot.slot]
            if name is None:
                raise CredentialMissing(f"{skill.name} needs credential for slot {slot.slot}")
            try:
                info = self.repo.get(name)
            except NotFound:
                raise CredentialMissing(
                    f"credential {name} bound to slot {slot.slot} of {skill.name} is gone"
                ) from None
            absent = [f for f in slot.fields if f not in info.sources]
            if absent:
                raise CredentialMissing(
                    f"credential {name} bound to slot {slot.slot} of {skill.name} has no field "
                    f"{absent[0]}"
                )
            try:
                key = self._open_key()
            except ConfigError as exc:  # a key file refused: the call cannot have its values
                raise CredentialUnreadable(f"credential {name}: {exc.message}") from None
            values = {}
            for field_name in slot.fields:
                values[field_name] = await read_value(
                    name, field_name, info.sources[field_name], key, self.rules
                )
            env, files = slot.render(values)
            injection.env.update(env)
            injection.files.extend(files)
            # The values, and what the templates made of them (a Basic header, a config file).
            injection.secrets.extend(values.values())
            injection.secrets.extend(v for v in env.values() if too_short(v) is None)
            injection.secrets.extend(f.content for f in files if too_short(f.content) is None)
            injection.slots[slot.slot] = name
        self.repo.used(sorted(set(injection.slots.values())))
        return injection

    async def grant(self, skill: Skill, call_id: str) -> tuple[Grant, dict[str, str]] | None:
        """The :class:`Grant` of one call of ``skill`` (its files written into a private
        folder: :meth:`release` it when the call ends) and its slot → credential names; None
        for a skill without slots. Raises as :meth:`injection` does."""
        injection = await self.injection(skill)
        if injection is None:
            return None
        folder = (
            calldir.write(self.calls_dir, call_id, injection.files) if injection.files else None
        )
        return Grant(injection.env, folder, injection.masker()), injection.slots

    @staticmethod
    def release(grant: Grant | None) -> None:
        """Remove a call's credential files (nothing for a grant without files)."""
        if grant is not None and grant.directory is not None:
            calldir.remove(grant.directory)

    def sweep(self) -> int:
        """Remove the credential folders of processes that died (at start-up)."""
        return calldir.sweep(self.calls_dir)

    # ---- helpers ----------------------------------------------------------------------------
    def _sources(
        self, name: str, values: Mapping[str, str], references: Mapping[str, str]
    ) -> dict[str, dict[str, str | list[str]]]:
        both = sorted(set(values) & set(references))
        if both:
            raise InvalidRequest(f"field {both[0]} is given both a value and a reference")
        sources: dict[str, dict[str, str | list[str]]] = {}
        for field_name, value in values.items():
            _check_field(field_name)
            problem = too_short(value)
            if problem is not None:
                raise InvalidRequest(f"field {field_name} of {name} {problem}")
            key = self._open_key(create=True)
            assert key is not None
            sources[field_name] = {"sealed": key.seal(name, field_name, value)}
        for field_name, text in references.items():
            _check_field(field_name)
            sources[field_name] = parse_reference(field_name, text, self.rules)
        return sources

    def _open_key(self, *, create: bool = False) -> CredentialKey | None:
        if self._key is None:
            self._key = load_key(self.key_file, self.data_dir, create=create)
        return self._key


def open_credentials(settings: Settings, repo: CredentialRepo) -> Credentials:
    """The credential store of a data dir, with the operator's rules from ``settings``."""
    return Credentials(
        repo,
        data_dir=settings.data_dir,
        key_file=settings.credentials_key_file,
        rules=SourceRules(
            settings.credential_file_roots, settings.credential_commands, settings.credential_env
        ),
        runtime_dir=settings.credentials_runtime_dir,
    )


def _check_field(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
        raise InvalidRequest(f"field name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")


__all__ = [
    "Credentials",
    "Injection",
    "check_name",
    "open_credentials",
    "target_of",
]
