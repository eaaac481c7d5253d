"""The registry: an immutable snapshot of skills and personas, and the holder that swaps it.

A reload never edits a registry: it builds a whole new one and swaps the holder's reference in
one assignment, so calls in flight keep the snapshot (and the Skill objects) they started with.
Nothing may mutate a Registry after it is built (its mappings are read-only views).
"""

from __future__ import annotations

import functools
import gc
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import ParamSpec

from ongrid_skills.errors import UnknownPersona, UnknownSkill
from ongrid_skills.skills.discovery import (
    LoadReport,
    LogSink,
    load_external,
    load_native,
    load_personas,
)
from ongrid_skills.skills.impls import bundled_dir, resolve
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.pack_load import load_pack_root
from ongrid_skills.skills.persona import BUNDLED_PERSONAS, Persona
from ongrid_skills.skills.schemas import signature_schema
from ongrid_skills.skills.search import SearchIndex
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS, SkillClass


class Registry:
    """Skills by name and personas by name, frozen at build time."""

    __slots__ = (
        "_aliases",
        "_index",
        "_json",
        "_names",
        "_personas",
        "_skills",
        "config",
        "pack_roots",
        "report",
    )

    def __init__(
        self,
        skills: Mapping[str, Skill],
        personas: Mapping[str, Persona] | None = None,
        report: LoadReport | None = None,
        config: Mapping[str, str] | None = None,
        pack_roots: tuple[str, ...] = (),
        *,
        inherit: Registry | None = None,
    ) -> None:
        """``inherit``: a previous snapshot whose serialised summaries are kept for the skills
        that are the very same objects here (the fleet rebuilds its merged view often)."""
        self._skills: Mapping[str, Skill] = MappingProxyType(dict(skills))
        self._names = tuple(sorted(self._skills))
        aliases: dict[str, str] = {}
        for skill in self._skills.values():  # in load order: the first skill of an alias wins
            for alias in skill.aliases:
                if alias not in self._skills:
                    aliases.setdefault(alias, skill.name)
        self._aliases: Mapping[str, str] = MappingProxyType(aliases)
        merged = {**BUNDLED_PERSONAS, **(personas or {})}
        self._personas: Mapping[str, Persona] = MappingProxyType(merged)
        self.report = report or LoadReport()
        self._index: SearchIndex | None = None
        self._json: dict[str, str] = {}
        if inherit is not None:
            before = inherit._skills
            for name, text in inherit._json.items():
                if before.get(name) is self._skills.get(name):
                    self._json[name] = text
        self.config: Mapping[str, str] = config if config is not None else {}
        #: The folders of the installed packs this snapshot loaded (skills/packroots.py).
        self.pack_roots = pack_roots

    def with_skills(
        self, skills: Mapping[str, Skill], *, inherit: Registry | None = None
    ) -> Registry:
        """This snapshot with other ``skills``: its personas, report, config and pack roots kept
        (the fleet's merged view of the local skills and the hosts'); ``inherit`` as for
        the constructor."""
        return Registry(
            skills,
            self._personas,
            self.report,
            self.config,
            self.pack_roots,
            inherit=inherit,
        )

    def with_personas(self, personas: Mapping[str, Persona]) -> Registry:
        """This snapshot with other ``personas`` (the stored ones merged in): its skills and
        their serialised summaries kept."""
        return Registry(
            self._skills,
            personas,
            self.report,
            self.config,
            self.pack_roots,
            inherit=self,
        )

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    @property
    def skills(self) -> Mapping[str, Skill]:
        return self._skills

    @property
    def personas(self) -> Mapping[str, Persona]:
        return self._personas

    def get(self, name: str) -> Skill:
        """The skill named ``name``; :class:`UnknownSkill` when there is none."""
        try:
            return self._skills[name]
        except KeyError:
            raise UnknownSkill(name, self.report.failure(name)) from None

    def lookup(self, name: str) -> Skill | None:
        """A skill by its name or an alias (the name its author wrote, ``pack:name``)."""
        skill = self._skills.get(name)
        if skill is None and name in self._aliases:
            skill = self._skills[self._aliases[name]]
        return skill

    def resolve(self, name: str) -> Skill:
        """Like :meth:`get`, aliases included."""
        skill = self.lookup(name)
        if skill is None:
            raise UnknownSkill(name, self.report.failure(name))
        return skill

    def persona(self, name: str) -> Persona:
        """The persona named ``name``; :class:`UnknownPersona` when there is none."""
        try:
            return self._personas[name]
        except KeyError:
            raise UnknownPersona(name, self.report.failure(name, ("persona",))) from None

    def list(
        self,
        *,
        category: str | None = None,
        skill_class: SkillClass | None = None,
        query: str | None = None,
        keep: Callable[[Skill], bool] | None = None,
    ) -> list[Skill]:
        """Skills sorted by name, filtered; ``keep`` is the caller's own filter (for a
        persona: ``lambda s: gate.offered(s, persona)``)."""
        out = []
        needle = query.lower() if query else None
        for name in self._names:
            skill = self._skills[name]
            if category and skill.category != category:
                continue
            if skill_class is not None and skill.skill_class is not skill_class:
                continue
            if needle and needle not in name and needle not in skill.description.lower():
                continue
            if keep is not None and not keep(skill):
                continue
            out.append(skill)
        return out

    def summary_json(self, skill: Skill) -> str:
        """The SkillSummary of a skill as JSON text, serialised once per snapshot."""
        text = self._json.get(skill.name)
        if text is None:
            text = self._json[skill.name] = json.dumps(skill.summary(), ensure_ascii=False)
        return text

    def search_index(self) -> SearchIndex:
        """The BM25 index of this snapshot, built on first use."""
        if self._index is None:
            self._index = SearchIndex(self._skills[n] for n in self._names)
        return self._index


#: The catalogue tools: safe, read-only views of the catalogue itself. A persona's whitelist
#: does not hide them (deferral depends on search_skills); its blacklist still can.
CATALOGUE_TOOLS = frozenset({"read_skill", "read_skill_file", "search_skills"})


BUNDLED_SKILLS_DIR = bundled_dir()


#: The in-process tools every registry with the bundled catalogue offers: impl, class,
#: category, timeout. ``install_skill`` is dangerous (two admin signers; docs/agent.md) and
#: may fetch a pack: it has the time of a download and a clone.
INTERNAL_TOOLS = (
    ("catalogue.read_skill", SkillClass.SAFE, "catalogue", DEFAULT_TIMEOUT_SECONDS),
    ("catalogue.read_skill_file", SkillClass.SAFE, "catalogue", DEFAULT_TIMEOUT_SECONDS),
    ("catalogue.search_skills", SkillClass.SAFE, "catalogue", DEFAULT_TIMEOUT_SECONDS),
    ("packtools.install_skill", SkillClass.DANGEROUS, "packs", 900),
)


def internal_skills() -> list[Skill]:
    """The internal tools (:data:`INTERNAL_TOOLS`): the catalogue tools and ``install_skill``."""
    out = []
    for impl, skill_class, category, timeout in INTERNAL_TOOLS:
        fn, why = resolve(impl)
        assert fn is not None, why  # shipped with the package: resolving it cannot fail
        doc = (fn.__doc__ or "").strip().splitlines()[0]
        out.append(
            Skill(
                name=fn.__name__,
                description=doc,
                skill_class=skill_class,
                category=category,
                kind="native",
                source="builtin",
                schema=signature_schema(fn),
                timeout_seconds=timeout,
                builtin=fn,
                origin="builtin",
                activation="always" if category == "catalogue" else None,
            )
        )
    return out


_P = ParamSpec("_P")


def _pausing_cycle_collection(build: Callable[_P, Registry]) -> Callable[_P, Registry]:
    """``build`` with the cyclic garbage collector paused: a load allocates tens of thousands of
    objects that all stay alive (no cycle to find), and the collections their allocation
    triggers cost about a tenth of a 10,000-skill load. Process-wide, for a load's duration
    only; nothing is lost, cycles made meanwhile are collected once it is back on."""

    @functools.wraps(build)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> Registry:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return build(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


@_pausing_cycle_collection
def build_registry(
    external_dirs: Iterable[str] = (),
    persona_dirs: Iterable[str] = (),
    *,
    native_dirs: Iterable[str] = (),
    bundled: bool = False,
    config: Mapping[str, str] | None = None,
    sink: LogSink | None = None,
    extra: Iterable[Skill] = (),
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
    pack_roots: Iterable[str] = (),
) -> Registry:
    """Load everything into a fresh Registry.

    Order (the first of a name wins): ``extra``, the internal catalogue tools and the bundled
    SKILL.md catalogue (``bundled``), ``native_dirs`` (SKILL.md), ``external_dirs``
    (skill.json), the installed packs (``pack_roots``: SKILL.md, Claude Code commands, then
    skill.json under each; an openclaw plugin's listed skills only: skills/pack_load.py),
    then personas (``persona_dirs``, then each pack's ``agents/``).
    """
    packs = tuple(pack_roots)
    report = LoadReport()
    skills: dict[str, Skill] = {s.name: s for s in extra}
    config = config if config is not None else {}
    if bundled:
        for skill in internal_skills():
            skills.setdefault(skill.name, skill)
        load_native(
            [BUNDLED_SKILLS_DIR],
            skills,
            report,
            sink,
            config=config,
            source="builtin",
            default_timeout=default_timeout,
        )
    load_native(
        list(native_dirs), skills, report, sink, config=config, default_timeout=default_timeout
    )
    load_external(list(external_dirs), skills, report, sink, default_timeout=default_timeout)
    for root in packs:  # packs/<id>/<version>: its skills say which pack they came from
        source = f"pack:{os.path.basename(os.path.dirname(root))}"
        load_pack_root(
            root,
            skills,
            report,
            sink,
            config=config,
            source=source,
            default_timeout=default_timeout,
        )
    personas: dict[str, Persona] = dict(BUNDLED_PERSONAS)
    agents = [os.path.join(root, "agents") for root in packs]
    load_personas([*persona_dirs, *(a for a in agents if os.path.isdir(a))], personas, report, sink)
    return Registry(skills, personas, report, config, packs)


class RegistryHolder:
    """Owns the current Registry; :meth:`reload` builds a new one and swaps it atomically."""

    def __init__(self, build: Callable[[], Registry]) -> None:
        """``build`` makes a complete Registry; it runs now and on every reload."""
        self._build = build
        self._lock = threading.Lock()
        self.current = build()

    def reload(self) -> Registry:
        """Build a fresh registry and swap it in; a build that raises leaves the current one."""
        with self._lock:
            fresh = self._build()
            self.current = fresh
            return fresh
