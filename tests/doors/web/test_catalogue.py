"""The catalogue's query over a real registry: groups, pages, filters, and the search ranking,
which must be the ``search_skills`` tool's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ongrid_skills.builtins.base import BuiltinContext
from ongrid_skills.builtins.catalogue import search_skills
from ongrid_skills.doors.web.catalogue import (
    NO_CATEGORY,
    PAGE_SIZE,
    CatalogueQuery,
    catalogue_page,
    model_tool,
    shown_category,
)
from ongrid_skills.errors import InvalidRequest, UnknownPersona
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import CATALOGUE_TOOLS, Registry
from ongrid_skills.types import SkillClass
from tests.support.skills import EXAMPLE_SKILLS, load, write_persona, write_skill

WORDS = ["disk", "port", "dns", "cache", "queue", "log", "cert", "memory"]


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    """The examples, the bundled catalogue, and 130 generated skills in three categories."""
    root = tmp_path / "skills"
    for i in range(130):
        word = WORDS[i % len(WORDS)]
        write_skill(
            root,
            f"check_{word}_{i:03d}",
            description=f"Check the {word} of service {i}." + (" Uses the disk." if i % 5 else ""),
            category=("alpha", "beta", "gamma")[i % 3],
            **{"class": ("safe", "mutating", "dangerous")[i % 3]},
        )
    write_persona(tmp_path / "personas", "reader", "read-only", tools=["check_disk_*"])
    loaded, _lines = load(
        external=[EXAMPLE_SKILLS, root], personas=[tmp_path / "personas"], bundled=True
    )
    return loaded


def query(**kw: object) -> CatalogueQuery:
    values: dict[str, object] = {
        "q": None,
        "skill_class": None,
        "source": None,
        "category": None,
        "persona": None,
        "page": 1,
        "tools": False,
    }
    values.update(kw)
    return CatalogueQuery.parse(**values)  # type: ignore[arg-type]


def names(view: object) -> list[str]:
    return [s.name for g in view.groups for s in g.skills]  # type: ignore[attr-defined]


def people(registry: Registry) -> list[Skill]:
    """What the catalogue lists by default: every skill but the model's catalogue tools."""
    return [s for s in registry.skills.values() if s.name not in CATALOGUE_TOOLS]


def test_without_a_search_skills_come_grouped_by_category_then_name(registry: Registry) -> None:
    everything = []
    page = 1
    while True:
        view = catalogue_page(registry, query(page=page))
        everything += [(g.title, s.name) for g in view.groups for s in g.skills]
        assert all(
            (shown_category(s) or NO_CATEGORY) == g.title for g in view.groups for s in g.skills
        )
        if page == view.pages:
            break
        page += 1
    assert len(everything) == len(people(registry))
    # By category; the skills whose category only repeats their kind last, under NO_CATEGORY.
    expected = sorted(people(registry), key=lambda s: (s.category == s.kind, s.category, s.name))
    assert everything == [(shown_category(s) or NO_CATEGORY, s.name) for s in expected]
    assert everything[-1][0] == NO_CATEGORY


def test_the_models_catalogue_tools_are_left_out_unless_asked_for(registry: Registry) -> None:
    default = catalogue_page(registry, query(), page_size=10_000)
    asked = catalogue_page(registry, query(tools=True), page_size=10_000)
    searched = catalogue_page(registry, query(q="read skill file"), page_size=10_000)
    assert not CATALOGUE_TOOLS & set(names(default))
    assert default.hidden_tools == 3
    assert set(names(asked)) >= CATALOGUE_TOOLS
    assert asked.hidden_tools == 0
    assert asked.total == default.total + 3
    assert not CATALOGUE_TOOLS & set(names(searched))
    assert searched.hidden_tools >= 1  # the page says the search found some, and how to see them
    assert all(model_tool(registry.skills[n]) for n in CATALOGUE_TOOLS)
    assert query(tools=True, q="x").with_tools(False) == {"q": "x"}
    assert query(q="x", page=4).with_tools(True) == {"q": "x", "tools": "1"}


def test_native_is_not_offered_as_a_category(registry: Registry) -> None:
    view = catalogue_page(registry, query())
    bundled = registry.skills["probe_tcp"]
    assert bundled.category == "native"  # what the loader writes for a SKILL.md tool
    assert shown_category(bundled) is None
    assert "native" not in view.categories
    assert "catalogue" not in view.categories  # the category of the model's tools only
    assert {"alpha", "beta", "gamma"} <= set(view.categories)


def test_pages_hold_page_size_skills_and_a_page_past_the_end_shows_the_last(
    registry: Registry,
) -> None:
    first = catalogue_page(registry, query())
    beyond = catalogue_page(registry, query(page=999))
    assert first.total == len(people(registry))
    assert first.pages == -(-len(registry) // PAGE_SIZE)
    assert len(names(first)) == PAGE_SIZE
    assert (first.first, first.last) == (1, PAGE_SIZE)
    assert beyond.page == first.pages
    assert beyond.last == len(people(registry))
    assert query(q="disk", page=3).params() == {"q": "disk", "page": "3"}
    assert query(skill_class="safe").params(page=1) == {"class": "safe"}


def test_the_search_ranks_exactly_as_the_search_skills_tool(registry: Registry) -> None:
    for words in ("disk", "check port", "dns of service", "probe tcp", "log_grep"):
        tool = search_skills(BuiltinContext(registry=registry), words, limit=50)
        ranked_by_tool = [hit["name"] for hit in tool["results"]]
        view = catalogue_page(registry, query(q=words, tools=True), page_size=10_000)
        # The tool leaves out what a model cannot run; the page keeps it, in the same order.
        shown = [n for n in names(view) if n in set(ranked_by_tool)]
        assert shown[: len(ranked_by_tool)] == ranked_by_tool, words
        assert view.ranked
        assert len(view.groups) == 1


def test_filters_keep_a_class_a_source_a_category_or_what_a_persona_is_offered(
    registry: Registry,
) -> None:
    dangerous = catalogue_page(registry, query(skill_class="dangerous"), page_size=10_000)
    builtin = catalogue_page(registry, query(source="builtin"), page_size=10_000)
    beta = catalogue_page(registry, query(category="beta", q="disk"), page_size=10_000)
    reader = catalogue_page(registry, query(persona="reader", tools=True), page_size=10_000)
    assert dangerous.total and all(
        s.skill_class is SkillClass.DANGEROUS for g in dangerous.groups for s in g.skills
    )
    assert builtin.total and all(s.source == "builtin" for g in builtin.groups for s in g.skills)
    assert beta.total and all(s.category == "beta" for g in beta.groups for s in g.skills)
    offered = set(names(reader))
    assert offered >= {"search_skills", "read_skill"}  # the catalogue tools pass a whitelist
    assert {n for n in offered if n.startswith("check_")} == {
        s.name
        for s in registry.skills.values()
        if s.name.startswith("check_disk_") and s.skill_class is SkillClass.SAFE
    }
    assert builtin.sources == sorted({s.source for s in people(registry)})
    assert "reader" in builtin.personas


def test_a_query_that_cannot_be_used_is_refused_clearly(registry: Registry) -> None:
    with pytest.raises(InvalidRequest, match="class must be"):
        query(skill_class="harmless")
    with pytest.raises(InvalidRequest, match="over 200"):
        query(q="x" * 201)
    with pytest.raises(UnknownPersona):
        catalogue_page(registry, query(persona="nobody"))
    nothing = catalogue_page(registry, query(q="zzzzqqq"))
    assert (nothing.total, nothing.groups, nothing.pages, nothing.first) == (0, [], 1, 0)
