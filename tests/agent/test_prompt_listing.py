"""The agent's system prompt stays bounded however many instructions skills there are: the listing
keeps the most relevant first up to ``prompt_listing_max_chars`` (default 4000) and tells the
model how many more ``search_skills`` finds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.agent.prompt import LISTING_HEADER, MAX_ENTRY_CHARS, system_prompt
from ongrid_skills.settings import DEFAULT_PROMPT_LISTING_CHARS, Settings
from ongrid_skills.skills.persona import DEFAULT_PERSONA
from ongrid_skills.toolspec import ranked_instructions
from tests.support.agent import FakeLLM, agent_settings, run_agent
from tests.support.llm import Reply
from tests.support.skills import load, write_skill_md

TOPICS = ("kafka lag", "postgres vacuum", "nginx reload", "dns cache", "tls renewal", "disk quota")


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def many_notes(native: Path, count: int = 120) -> None:
    for index in range(count):
        topic = TOPICS[index % len(TOPICS)]
        write_skill_md(
            native,
            f"n{index:03d}",
            {
                "name": f"runbook_{index:03d}",
                "description": f"How to handle {topic} on cluster {index}. " + "Details. " * 20,
            },
        )
    write_skill_md(
        native,
        "zz-certs",
        {"name": "zz_certificates", "description": "Rotate expiring x509 certificates safely."},
    )
    write_skill_md(
        native,
        "zz-pager",
        {
            "name": "zz_pager",
            "description": "Who to page.",
            "activation": {"mode": "keyword", "keywords": ["outage"]},
        },
    )


def test_the_listing_stops_at_the_cap_and_says_how_many_more(tmp_path: Path) -> None:
    many_notes(tmp_path / "native")
    registry, _ = load([tmp_path / "native"])
    notes = ranked_instructions(registry, None, "rotate the certificates")
    assert len(notes) == 121
    prompt = system_prompt(DEFAULT_PERSONA, notes, False)
    persona = DEFAULT_PERSONA.prompt.strip()
    listing = prompt[len(persona) + 2 :]
    assert listing.startswith(LISTING_HEADER)
    assert len(listing) <= DEFAULT_PROMPT_LISTING_CHARS + 120  # + the closing "N more" line
    listed = [line for line in listing.splitlines() if line.startswith("- ")]
    assert listed[0].startswith("- zz_certificates: ")  # the most relevant first
    assert all(len(line) <= MAX_ENTRY_CHARS for line in listed)
    more = len(notes) - len(listed)
    assert listing.endswith(
        f"({more} more are not listed: find them with search_skills, then read one with "
        "read_skill.)"
    )
    unbounded = system_prompt(DEFAULT_PERSONA, notes, False, listing_chars=10**9)
    assert len(unbounded) > 5 * len(prompt)


def test_keyword_activated_skills_come_first_then_relevance_then_names(tmp_path: Path) -> None:
    many_notes(tmp_path / "native", count=12)
    registry, _ = load([tmp_path / "native"])
    names = [s.name for s in ranked_instructions(registry, None, "outage: postgres vacuum stuck")]
    assert names[0] == "zz_pager"
    assert names[1] in {"runbook_001", "runbook_007"}  # the postgres vacuum runbooks
    without = [s.name for s in ranked_instructions(registry, None, None)]
    assert without == sorted(without) and "zz_pager" not in without


def test_a_cap_of_zero_lists_none_and_points_to_search(tmp_path: Path) -> None:
    many_notes(tmp_path / "native", count=3)
    registry, _ = load([tmp_path / "native"])
    prompt = system_prompt(DEFAULT_PERSONA, ranked_instructions(registry), False, listing_chars=0)
    assert "- runbook_000" not in prompt
    assert "(4 more are not listed: find them with search_skills" in prompt


def test_the_cap_is_a_setting() -> None:
    assert Settings.load({}).prompt_listing_max_chars == DEFAULT_PROMPT_LISTING_CHARS
    env = {"ONGRID_PROMPT_LISTING_MAX_CHARS": "1500"}
    assert Settings.load(env).prompt_listing_max_chars == 1500
    assert Settings.load({"ONGRID_PROMPT_LISTING_MAX_CHARS": "0"}).prompt_listing_max_chars == 0


def test_the_agent_sends_the_capped_listing_each_turn(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    native = tmp_path / "native"
    many_notes(native)
    settings = agent_settings(
        tmp_path,
        skills_root,
        fake,
        native_dirs=(str(native),),
        bundled_skills=True,
        prompt_listing_max_chars=1500,
    )
    fake.add(Reply("done"))
    outcome = run_agent(settings, "our x509 certificates expire tomorrow")
    assert outcome.record.status == "done"
    system = fake.system(0)
    assert len(system) < 1500 + 400
    assert "- zz_certificates: Rotate expiring x509 certificates safely." in system
    assert "more are not listed: find them with search_skills" in system
    assert "search_skills" in fake.tool_names(0)
