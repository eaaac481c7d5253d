"""search.py: tokenisation and BM25 ranking over name, description and when_to_use."""

from __future__ import annotations

import pytest

from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.search import SearchIndex, tokens


def skill(name: str, description: str = "", when_to_use: str | None = None) -> Skill:
    return Skill(name=name, description=description or f"{name} skill", when_to_use=when_to_use)


def ranked(index: SearchIndex, query: str, limit: int = 10) -> list[str]:
    return [s.name for s, _ in index.search(query, limit)]


# ---- tokens ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("probe_tcp: Probe a TCP port", ["probe", "tcp", "probe", "a", "tcp", "port"]),
        ("Disk-Usage of /var/LOG", ["disk", "usage", "of", "var", "log"]),
        ("HTTP2 status 503!", ["http2", "status", "503"]),
        ("", []),
        ("  ...  ", []),
        ("Comprueba la conexión TCP", ["comprueba", "la", "conexión", "tcp"]),
        ("Größe über", ["größe", "über"]),
    ],
)
def test_tokens_are_lowercase_words_with_snake_case_split(text: str, expected: list[str]) -> None:
    assert tokens(text) == expected


# ---- ranking ---------------------------------------------------------------------------------
@pytest.fixture
def index() -> SearchIndex:
    return SearchIndex(
        [
            skill("probe_tcp", "Check whether a TCP port accepts connections."),
            skill("probe_http", "Request an HTTP URL and report the status."),
            skill("tail_file", "Return the last lines of a log file."),
            skill("disk_usage", "Free space of a file system.", "When writes fail: no space left."),
            skill("read_journal", "Read systemd journal entries of a unit."),
        ]
    )


def test_the_most_relevant_skill_ranks_first(index: SearchIndex) -> None:
    assert ranked(index, "tcp port")[0] == "probe_tcp"
    assert ranked(index, "last lines of a log")[0] == "tail_file"
    assert ranked(index, "systemd unit logs")[0] == "read_journal"


def test_when_to_use_is_searched(index: SearchIndex) -> None:
    assert ranked(index, "writes fail") == ["disk_usage"]


def test_the_search_is_case_insensitive(index: SearchIndex) -> None:
    assert ranked(index, "JOURNAL") == ranked(index, "journal") == ["read_journal"]


def test_a_query_matching_nothing_returns_nothing(index: SearchIndex) -> None:
    assert index.search("kubernetes") == []
    assert index.search("") == []
    assert index.search("   ") == []


def test_the_whole_name_is_a_term(index: SearchIndex) -> None:
    assert ranked(index, "probe_http")[0] == "probe_http"


def test_a_term_in_the_name_outweighs_the_same_term_in_a_description() -> None:
    index = SearchIndex(
        [
            skill("aaa_helper", "Restart the web server when it hangs."),
            skill("restart_unit", "Bring a unit back."),
        ]
    )
    hits = index.search("restart")
    assert [s.name for s, _ in hits] == ["restart_unit", "aaa_helper"]
    assert hits[0][1] > hits[1][1] > 0


def test_rarer_terms_weigh_more() -> None:
    index = SearchIndex(
        [
            skill("one", "common common zebra"),
            skill("two", "common"),
            skill("three", "common"),
        ]
    )
    hits = dict((s.name, score) for s, score in index.search("zebra common"))
    assert max(hits, key=lambda n: hits[n]) == "one"
    assert hits["two"] == hits["three"] < hits["one"]


def test_ties_are_broken_by_name() -> None:
    index = SearchIndex([skill(n, "Same words here.") for n in ("zulu", "alpha", "mike")])
    hits = index.search("words")
    assert [s.name for s, _ in hits] == ["alpha", "mike", "zulu"]
    assert len({score for _, score in hits}) == 1


def test_limit_caps_the_results_after_ranking() -> None:
    index = SearchIndex([skill(f"s{i:02d}", "backup the database") for i in range(20)])
    assert ranked(index, "backup", limit=3) == ["s00", "s01", "s02"]
    assert len(index.search("backup")) == 10  # the default limit
    assert len(index.search("backup", limit=50)) == 20


def test_keep_filters_before_the_limit_is_applied(index: SearchIndex) -> None:
    hits = index.search("a", limit=2, keep=lambda s: s.name.startswith("probe"))
    assert {s.name for s, _ in hits} <= {"probe_tcp", "probe_http"}
    every = index.search("port status", limit=1, keep=lambda s: s.name != "probe_tcp")
    assert [s.name for s, _ in every] == ["probe_http"]


def test_scores_are_rounded_and_positive(index: SearchIndex) -> None:
    for _, score in index.search("tcp http log journal"):
        assert score > 0
        assert round(score, 4) == score


def test_an_empty_index_answers_nothing() -> None:
    assert SearchIndex([]).search("anything") == []


def test_non_ascii_descriptions_are_searchable_by_their_words() -> None:
    index = SearchIndex(
        [
            skill("comprobar_puerto", "Comprueba la conexión a un puerto TCP."),
            skill("version_paquete", "Muestra la versión instalada de un paquete."),
        ]
    )
    assert ranked(index, "conexión") == ["comprobar_puerto"]
    assert ranked(index, "versión") == ["version_paquete"]
    assert index.search("n") == []  # no stray fragments of accented words


def test_a_ten_thousand_skill_index_answers() -> None:
    skills = [
        skill(
            f"skill_{i:05d}",
            f"Maintenance job {i} for service {i % 97} in zone {i % 13}.",
            f"When service {i % 97} misbehaves." if i % 2 else None,
        )
        for i in range(10_000)
    ]
    skills.append(skill("purge_varnish_cache", "Purge the varnish HTTP cache of a site."))
    index = SearchIndex(skills)
    assert len(index.skills) == 10_001
    assert ranked(index, "purge varnish cache", limit=5)[0] == "purge_varnish_cache"
    hits = index.search("service 42 misbehaves", limit=50)
    assert len(hits) == 50
    assert all(s.name.startswith("skill_") for s, _ in hits)
    assert ranked(index, "skill_01234", limit=1) == ["skill_01234"]
