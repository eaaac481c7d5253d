"""The catalogue as the console shows it: filtered, searched, grouped and cut into pages.

Pure functions of a registry snapshot and a query; no request, no store. Searching uses the
registry's BM25 index, the ranking of the ``search_skills`` tool (``skills/search.py``); without
a search the skills are grouped by category, each group sorted by name. The persona filter keeps
what the persona is offered (``governance.gate.offered``, as ``GET /v1/skills?persona=`` does).
Unlike ``search_skills``, unavailable skills stay listed, with their reason.

The catalogue is for people: the model's own catalogue tools (``read_skill``,
``read_skill_file``, ``search_skills``) are left out unless asked for (``tools=1``), and a
category that only repeats the skill's kind (a SKILL.md tool declares none: the loader writes
``native`` or ``instructions``) is not shown as one: those skills are grouped under
:data:`NO_CATEGORY`, last.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import groupby

from ongrid_skills.errors import InvalidRequest
from ongrid_skills.governance.gate import offered
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import CATALOGUE_TOOLS, Registry
from ongrid_skills.types import SkillClass

PAGE_SIZE = 50
MAX_QUERY_CHARS = 200
NO_CATEGORY = "No category"
#: The ways the catalogue can be shown; the first is the default.
VIEWS = ("cards", "table")


def shown_category(skill: Skill) -> str | None:
    """The skill's category as people should read it; None when it only repeats the kind."""
    return None if skill.category == skill.kind else skill.category


def model_tool(skill: Skill) -> bool:
    """One of the model's own catalogue tools (built in, not a skill anyone wrote)."""
    return skill.source == "builtin" and skill.name in CATALOGUE_TOOLS


@dataclass(frozen=True, slots=True)
class CatalogueQuery:
    """What the catalogue page was asked for (its query string, checked)."""

    q: str = ""
    skill_class: SkillClass | None = None
    source: str | None = None
    category: str | None = None
    persona: str | None = None
    page: int = 1
    tools: bool = False  # the model's catalogue tools are listed too

    @classmethod
    def parse(
        cls,
        q: str | None,
        skill_class: str | None,
        source: str | None,
        category: str | None,
        persona: str | None,
        page: int,
        tools: bool = False,
    ) -> CatalogueQuery:
        """From the raw query parameters (an empty value means "any"); InvalidRequest when one
        cannot be used."""
        text = (q or "").strip()
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidRequest(f"the search is over {MAX_QUERY_CHARS} characters")
        try:
            wanted = SkillClass(skill_class) if skill_class else None
        except ValueError:
            raise InvalidRequest("class must be safe, mutating or dangerous") from None
        return cls(text, wanted, source or None, category or None, persona or None, page, tools)

    def filtered(self) -> bool:
        return bool(
            self.q or self.skill_class or self.source or self.category or self.persona or self.tools
        )

    def params(self, page: int | None = None) -> dict[str, str]:
        """The query string of this query (at another ``page``), empty values left out."""
        values = {
            "q": self.q,
            "class": self.skill_class.value if self.skill_class else "",
            "source": self.source or "",
            "category": self.category or "",
            "persona": self.persona or "",
            "tools": "1" if self.tools else "",
            "page": str(page if page is not None else self.page),
        }
        return {k: v for k, v in values.items() if v and not (k == "page" and v == "1")}

    def with_tools(self, tools: bool) -> dict[str, str]:
        """The query string of this query on its first page, the model's tools shown or not."""
        values = CatalogueQuery(
            self.q, self.skill_class, self.source, self.category, self.persona, 1, tools
        )
        return values.params()


@dataclass(frozen=True, slots=True)
class Group:
    title: str
    skills: list[Skill]


@dataclass(frozen=True, slots=True)
class CataloguePage:
    """One page of the catalogue and what the filter form offers."""

    query: CatalogueQuery
    groups: list[Group]
    total: int
    page: int
    pages: int
    ranked: bool
    sources: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    personas: list[str] = field(default_factory=list)
    #: How many of the model's catalogue tools the query would list but leaves out.
    hidden_tools: int = 0

    @property
    def skills(self) -> list[Skill]:
        """The page's skills, in the order shown."""
        return [skill for group in self.groups for skill in group.skills]

    @property
    def first(self) -> int:
        """The position of the page's first skill in the whole result (1-based)."""
        return (self.page - 1) * PAGE_SIZE + 1 if self.total else 0

    @property
    def last(self) -> int:
        return min(self.page * PAGE_SIZE, self.total)


def _keep(registry: Registry, query: CatalogueQuery) -> Callable[[Skill], bool]:
    persona = registry.persona(query.persona) if query.persona else None

    def keep(skill: Skill) -> bool:
        if query.skill_class is not None and skill.skill_class is not query.skill_class:
            return False
        if query.source is not None and skill.source != query.source:
            return False
        if query.category is not None and skill.category != query.category:
            return False
        return persona is None or offered(skill, persona)

    return keep


def catalogue_page(
    registry: Registry, query: CatalogueQuery, page_size: int = PAGE_SIZE
) -> CataloguePage:
    """The page of ``query``: ranked hits for a search, else grouped by category."""
    keep = _keep(registry, query)  # every filter but the one of the model's tools
    ranked = bool(query.q)
    if ranked:
        hits = registry.search_index().search(query.q, limit=max(len(registry), 1), keep=keep)
        found = [skill for skill, _score in hits]
    else:
        found = sorted((s for s in registry.skills.values() if keep(s)), key=_grouping)
    matched = found if query.tools else [s for s in found if not model_tool(s)]
    total = len(matched)
    pages = max(1, math.ceil(total / page_size))
    page = min(max(query.page, 1), pages)
    shown = matched[(page - 1) * page_size : page * page_size]
    if ranked:
        groups = [Group(f"Results for “{query.q}”", shown)] if shown else []
    else:
        groups = [
            Group(cat or NO_CATEGORY, list(items)) for cat, items in groupby(shown, shown_category)
        ]
    skills = [s for s in registry.skills.values() if query.tools or not model_tool(s)]
    return CataloguePage(
        query=query,
        groups=groups,
        total=total,
        page=page,
        pages=pages,
        ranked=ranked,
        sources=sorted({s.source for s in skills}),
        categories=sorted({c for s in skills if (c := shown_category(s)) is not None}),
        personas=sorted(registry.personas),
        hidden_tools=len(found) - len(matched),
    )


def _grouping(skill: Skill) -> tuple[bool, str, str]:
    """Grouped by the category shown, the skills without one last; then by name."""
    category = shown_category(skill)
    return (category is None, category or "", skill.name)
