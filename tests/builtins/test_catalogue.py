"""The internal catalogue tools: read_skill (progressive disclosure) and search_skills."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import InvalidArgs, Status
from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.builtins.catalogue import read_skill, search_skills
from ongrid_skills.execution.records import Execution
from ongrid_skills.skills.registry import BUNDLED_SKILLS_DIR, Registry, internal_skills
from ongrid_skills.skills.schemas import signature_schema
from tests.support.skills import load, write_exec, write_persona, write_skill, write_skill_md

GUIDE_BODY = "# Nginx guide\n\nReload, never restart, during business hours.\n"
TOOLS_BODY = "# Cache tools\n\nPurge first, then warm.\n"


@pytest.fixture
def catalogue(tmp_path: Path) -> Registry:
    native = tmp_path / "native"
    write_skill_md(
        native,
        "nginx-guide",
        {
            "name": "nginx-guide",
            "description": "How we operate nginx.",
            "when_to_use": "Before touching nginx.",
        },
        GUIDE_BODY,
    )
    write_skill_md(
        native,
        "cache",
        {
            "name": "cache_tools",
            "description": "Varnish cache tools.",
            "tools": [
                {"name": "cache_purge", "impl": "exec:run.sh", "class": "write"},
                {"name": "cache_stats", "impl": "exec:run.sh", "description": "Cache hit ratio."},
            ],
        },
        TOOLS_BODY,
    )
    write_exec(native / "cache", "run.sh")
    write_skill_md(
        native,
        "gone",
        {
            "name": "cache_gone",
            "description": "A cache tool that cannot load.",
            "tools": [
                {"name": "cache_gone", "impl": "builtin:nope.nothing"},
                {"name": "cache_usage", "impl": "builtin:files.disk_usage"},
            ],
        },
    )
    external = tmp_path / "external"
    write_skill(external, "cache_delete", description="Delete the cache volume.")
    write_skill(
        external, "cache_wipe", description="Wipe the cache disk.", **{"class": "dangerous"}
    )
    personas = tmp_path / "personas"
    write_persona(personas, "looker", "read-only", disallowed_tools=["*_delete"])
    write_persona(personas, "boss", "dual-sign-required")
    registry, lines = load([native], [external], [personas], bundled=True)
    assert not registry.report.errors, lines
    return registry


def call(registry: Registry, name: str, args: dict[str, Any], **kw: Any) -> Execution:
    return asyncio.run(ongrid_skills.execute(registry, name, args, **kw))


# ---- the internal tools themselves ---------------------------------------------------------
def test_the_bundled_catalogue_brings_read_skill_and_search_skills() -> None:
    registry, _ = load(bundled=True)
    for fn in (read_skill, search_skills):
        skill = registry.get(fn.__name__)
        assert skill.builtin is fn
        assert skill.category == "catalogue"
        assert skill.activation == "always"
        assert skill.schema == signature_schema(fn)
        assert skill.available
    names = [s.name for s in internal_skills()]
    assert names == ["read_skill", "read_skill_file", "search_skills", "install_skill"]
    assert BUNDLED_SKILLS_DIR.endswith("bundled")


def test_without_the_bundled_catalogue_there_are_no_internal_tools() -> None:
    registry, _ = load(bundled=False)
    assert "read_skill" not in registry
    assert "search_skills" not in registry


def test_the_catalogue_tool_schemas_bound_their_args(catalogue: Registry) -> None:
    with pytest.raises(InvalidArgs):
        call(catalogue, "read_skill", {})
    with pytest.raises(InvalidArgs):
        call(catalogue, "read_skill", {"name": "x" * 65})
    with pytest.raises(InvalidArgs):
        call(catalogue, "search_skills", {"query": "cache", "limit": 0})
    with pytest.raises(InvalidArgs):
        call(catalogue, "search_skills", {"query": "cache", "limit": 51})
    with pytest.raises(InvalidArgs):
        call(catalogue, "search_skills", {"query": "cache", "other": 1})


# ---- read_skill ----------------------------------------------------------------------------
def test_read_skill_returns_the_body_of_an_instructions_skill(catalogue: Registry) -> None:
    done = call(catalogue, "read_skill", {"name": "nginx_guide"})
    assert done.status is Status.SUCCEEDED, done.error
    assert done.result == {
        "name": "nginx_guide",
        "description": "How we operate nginx.",
        "when_to_use": "Before touching nginx.",
        "kind": "instructions",
        "available": True,
        "unavailable_reason": None,
        "tools": [],
        "body": GUIDE_BODY,
        "extra": None,
        "aliases": ["nginx-guide", "native:nginx-guide", "native:nginx_guide"],
        "folder": str(catalogue.get("nginx_guide").base_dir),
        "files": [],
        "files_truncated": False,
    }


def test_read_skill_on_a_tool_gives_its_skill_md_body_and_sibling_tools(
    catalogue: Registry,
) -> None:
    done = call(catalogue, "read_skill", {"name": "cache_stats"})
    assert done.status is Status.SUCCEEDED, done.error
    assert done.result["body"] == TOOLS_BODY
    assert done.result["description"] == "Cache hit ratio."
    assert done.result["tools"] == ["cache_purge", "cache_stats"]
    assert done.result["kind"] == "subprocess"


def test_read_skill_on_an_external_skill_has_no_body(catalogue: Registry) -> None:
    done = call(catalogue, "read_skill", {"name": "cache_delete"})
    assert done.status is Status.SUCCEEDED
    assert done.result["body"] == ""
    assert done.result["tools"] == ["cache_delete"]


def test_read_skill_reports_an_unavailable_skill_with_its_reason(catalogue: Registry) -> None:
    done = call(catalogue, "read_skill", {"name": "cache_gone"})
    assert done.status is Status.SUCCEEDED
    assert done.result["available"] is False
    assert done.result["unavailable_reason"] == "unknown impl builtin:nope.nothing"


def test_read_skill_on_an_unknown_name_fails_with_a_hint(catalogue: Registry) -> None:
    done = call(catalogue, "read_skill", {"name": "no_such_skill"})
    assert done.status is Status.FAILED
    assert done.error is not None
    assert done.error.code == "builtin_failed"
    assert done.error.message == "no skill named 'no_such_skill'; use search_skills to find one"
    assert done.exit_code == 1


def test_catalogue_tools_need_a_registry() -> None:
    with pytest.raises(BuiltinFailure, match="no registry"):
        read_skill(BuiltinContext(), "x")
    with pytest.raises(BuiltinFailure, match="no registry"):
        search_skills(BuiltinContext(), "x")


# ---- search_skills -------------------------------------------------------------------------
def found(done: Execution) -> list[str]:
    assert done.status is Status.SUCCEEDED, done.error
    return [item["name"] for item in done.result["results"]]


def test_search_skills_ranks_by_relevance_and_describes_each_hit(catalogue: Registry) -> None:
    done = call(catalogue, "search_skills", {"query": "cache hit ratio"})
    assert found(done)[0] == "cache_stats"
    first = done.result["results"][0]
    assert set(first) == {"name", "description", "class", "kind", "when_to_use", "score"}
    assert first["class"] == "safe"
    assert done.result["query"] == "cache hit ratio"


def test_search_skills_hides_the_catalogue_tools_themselves(catalogue: Registry) -> None:
    names = found(
        call(catalogue, "search_skills", {"query": "read skill search skills", "limit": 50})
    )
    assert "read_skill" not in names
    assert "search_skills" not in names


def test_search_skills_hides_unavailable_skills(catalogue: Registry) -> None:
    names = found(call(catalogue, "search_skills", {"query": "cache", "limit": 50}))
    assert "cache_gone" not in names


def test_search_skills_without_a_persona_lists_every_class(catalogue: Registry) -> None:
    names = found(call(catalogue, "search_skills", {"query": "cache", "limit": 50}))
    assert {"cache_purge", "cache_stats", "cache_delete", "cache_wipe"} <= set(names)


def test_search_skills_hides_what_the_persona_may_not_run(catalogue: Registry) -> None:
    looker = found(
        call(catalogue, "search_skills", {"query": "cache", "limit": 50}, persona="looker")
    )
    assert "cache_stats" in looker
    assert "cache_purge" not in looker  # mutating, read-only persona
    assert "cache_wipe" not in looker  # dangerous
    assert "cache_delete" not in looker  # blacklisted by *_delete
    boss = found(call(catalogue, "search_skills", {"query": "cache", "limit": 50}, persona="boss"))
    assert {"cache_purge", "cache_stats", "cache_delete", "cache_wipe"} <= set(boss)


def test_search_skills_respects_the_limit(catalogue: Registry) -> None:
    assert len(found(call(catalogue, "search_skills", {"query": "cache", "limit": 2}))) == 2
