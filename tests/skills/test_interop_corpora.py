"""The three public collections of ``shared/interop-corpora`` load the way their authors meant.

Read in place from ``../shared/interop-corpora`` beside the repository (never copied into it):
anthropics/skills, obra/superpowers and ComposioHQ/awesome-claude-skills, ~890 SKILL.md in all.
Every file loads or gets a loader line saying why not; the files the skills ship are reachable
through ``read_skill``/``read_skill_file``; the names their authors wrote and their
``superpowers:<name>`` cross-references resolve; the agent's prompt stays bounded; ``validate``
finds no error. When the folder is missing these tests fail, they do not skip.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills.agent.prompt import system_prompt
from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.settings import DEFAULT_PROMPT_LISTING_CHARS
from ongrid_skills.skills.lint import validate_paths
from ongrid_skills.skills.persona import DEFAULT_PERSONA
from ongrid_skills.skills.registry import Registry
from ongrid_skills.toolspec import ranked_instructions
from tests.support.skills import load

REPOSITORY = Path(__file__).resolve().parents[2]
CORPORA = REPOSITORY / ".." / "shared" / "interop-corpora"
COLLECTIONS = ("anthropics__skills", "obra__superpowers", "ComposioHQ__awesome-claude-skills")
CROSS_REFERENCE_RE = re.compile(r"superpowers:([a-z0-9-]+)")


@pytest.fixture(scope="module")
def roots() -> list[Path]:
    folders = [(CORPORA / name).resolve() for name in COLLECTIONS]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        pytest.fail(
            "the shared interop corpora are missing: "
            f"{', '.join(missing)} (expected shared/interop-corpora beside the repository)"
        )
    return folders


@pytest.fixture(scope="module")
def corpus(roots: list[Path]) -> tuple[Registry, list[str]]:
    return load(roots, bundled=True)


def skill_files(roots: list[Path]) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*") if p.name.lower() == "skill.md")


def call(registry: Registry, name: str, args: dict[str, Any]) -> Execution:
    return asyncio.run(ongrid_skills.execute(registry, name, args))


def test_every_skill_md_loads_or_gets_a_line_naming_it(
    roots: list[Path], corpus: tuple[Registry, list[str]]
) -> None:
    registry, lines = corpus
    files = skill_files(roots)
    assert len(files) >= 880
    assert not registry.report.errors, registry.report.errors[:3]
    loaded = {s.origin for s in registry.skills.values() if s.source == "native"}
    skipped = {str(f) for f in files} - loaded
    for path in skipped:  # a name taken by an earlier file: the line says so, naming this file
        assert any(line.endswith(f"skipping {path}") for line in lines), path
    assert len(loaded) + len(skipped) == len(files)
    assert len(loaded) >= 850


def test_names_colliding_once_normalised_get_one_line_naming_both_files(
    corpus: tuple[Registry, list[str]],
) -> None:
    _, lines = corpus
    collisions = [line for line in lines if "collide once normalised" in line]
    assert collisions  # google_admin-automation and google-admin-automation, among others
    for line in collisions:
        files = re.findall(r" in (/\S+/SKILL\.md)", line)
        assert len(files) == 2 and files[0] != files[1], line
        assert all(Path(f).is_file() for f in files)


def test_the_files_skills_ship_are_reachable(corpus: tuple[Registry, list[str]]) -> None:
    registry, _ = corpus
    with_files = 0
    by_file = {s.origin: s for s in registry.skills.values() if s.source == "native"}
    for skill in by_file.values():
        answer = call(registry, "read_skill", {"name": skill.name})
        assert answer.status is Status.SUCCEEDED, answer.error
        assert answer.result["folder"] == skill.base_dir
        files = answer.result["files"]
        if not files:
            continue
        with_files += 1
        for entry in files:
            read = call(registry, "read_skill_file", {"name": skill.name, "path": entry["path"]})
            assert read.status is Status.SUCCEEDED, (skill.name, entry, read.error)
            assert read.result["size"] == entry["size"]
    assert with_files >= 20


def test_a_reference_file_of_an_anthropic_skill_is_read_by_its_listed_path(
    corpus: tuple[Registry, list[str]],
) -> None:
    registry, _ = corpus
    answer = call(registry, "read_skill", {"name": "mcp_builder"}).result
    paths = [f["path"] for f in answer["files"]]
    assert "reference/mcp_best_practices.md" in paths
    read = call(
        registry,
        "read_skill_file",
        {"name": "mcp-builder", "path": "reference/mcp_best_practices.md"},
    )
    assert read.status is Status.SUCCEEDED
    assert read.result["text"].startswith("#")


def test_written_names_and_superpowers_cross_references_resolve(
    roots: list[Path], corpus: tuple[Registry, list[str]]
) -> None:
    registry, _ = corpus
    superpowers = roots[1]
    referenced = {
        match
        for path in superpowers.rglob("*.md")
        for match in CROSS_REFERENCE_RE.findall(path.read_text(encoding="utf-8"))
    }
    assert len(referenced) >= 8
    for name in sorted(referenced):
        answer = call(registry, "read_skill", {"name": f"superpowers:{name}"})
        assert answer.status is Status.SUCCEEDED, (name, answer.error)
        assert answer.result["name"] == name.replace("-", "_")
    written = call(registry, "read_skill", {"name": "artifacts-builder"})
    assert written.status is Status.SUCCEEDED
    assert written.result["name"] == "artifacts_builder"
    assert "awesome-claude-skills:artifacts-builder" in written.result["aliases"]


def test_every_corpus_skill_is_available_and_shows_what_its_author_declared(
    corpus: tuple[Registry, list[str]],
) -> None:
    registry, _ = corpus
    native = [s for s in registry.skills.values() if s.source == "native"]
    assert all(s.available for s in native), [s.name for s in native if not s.available][:5]
    licensed = [s for s in native if s.extra and "license" in s.extra]
    assert licensed
    assert all(registry.summary_json(s).count('"license"') == 1 for s in licensed)


def test_the_agent_prompt_lists_the_relevant_skills_within_the_cap(
    corpus: tuple[Registry, list[str]],
) -> None:
    registry, _ = corpus
    message = "I am starting a feature: write the failing test first (test-driven development)"
    notes = ranked_instructions(registry, DEFAULT_PERSONA, message)
    assert len(notes) >= 850
    prompt = system_prompt(DEFAULT_PERSONA, notes, deferred=False)
    persona_part = len(DEFAULT_PERSONA.prompt.strip()) + 2
    assert len(prompt) <= persona_part + DEFAULT_PROMPT_LISTING_CHARS
    assert "- test_driven_development: " in prompt
    assert re.search(r"\(\d+ more are not listed: find them with search_skills", prompt)
    found = call(registry, "search_skills", {"query": "brex automation", "limit": 3})
    assert "brex_automation" in [hit["name"] for hit in found.result["results"]]


def test_validate_finds_no_error_in_the_corpora(roots: list[Path]) -> None:
    findings = validate_paths([str(r) for r in roots])
    errors = [f.format() for f in findings if f.severity == "error"]
    assert errors == []
    assert not any("persona" in f.message for f in findings)
