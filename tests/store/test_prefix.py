"""Id prefixes on a real SQLite store: exact matches only, answered from the primary key's index."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from ongrid_skills.errors import InvalidRequest
from ongrid_skills.execution.records import Execution
from ongrid_skills.store import Store, open_store
from ongrid_skills.store.approvals import Approval
from ongrid_skills.store.executions import _EXEC
from ongrid_skills.store.prefix import id_starts_with, normalise

IDS = [
    "abcd0000000000000000000000000000",
    "abcd1111111111111111111111111111",
    "abce0000000000000000000000000000",
    "abc00000000000000000000000000000",
    "ffff0000000000000000000000000000",
    "0000ffff000000000000000000000000",
]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = open_store(str(tmp_path / "data"))
    with opened.tx() as conn:
        for number, ident in enumerate(IDS):
            execution = Execution(skill="s", args={}, id=ident, created_at=1000.0 + number)
            opened.executions.insert(conn, execution)
    return opened


@pytest.mark.parametrize(
    ("prefix", "found"),
    [
        ("abcd", [IDS[1], IDS[0]]),  # newest first
        ("ABCD1", [IDS[1]]),  # compared in lower case
        ("abc", [IDS[3], IDS[2], IDS[1], IDS[0]]),
        ("abcf", []),
        ("f", [IDS[4]]),
        ("0000ffff", [IDS[5]]),
        (IDS[2], [IDS[2]]),  # a whole id
    ],
)
def test_a_prefix_finds_exactly_the_ids_that_start_with_it(
    store: Store, prefix: str, found: list[str]
) -> None:
    items, _ = store.executions.page(id_prefix=prefix, limit=50)
    assert [e.id for e in items] == found


@pytest.mark.parametrize("prefix", ["", "abcg", "ab%", "ab_d", "a" * 33, "ab cd", "ａｂ"])
def test_anything_but_hex_digits_is_refused(prefix: str) -> None:
    with pytest.raises(InvalidRequest, match="1 to 32 hex digits"):
        normalise(prefix)


def test_the_prefix_query_searches_the_primary_key_index(store: Store) -> None:
    query = select(_EXEC).where(id_starts_with(_EXEC.c.id, "abcd"))
    sql = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    with store.read() as conn:
        plan = " ".join(str(row) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    assert "SEARCH executions USING INDEX sqlite_autoindex_executions_1 (id>? AND id<?)" in plan


def test_approvals_are_filtered_by_prefix_too(store: Store) -> None:
    with store.tx() as conn:
        for number, ident in enumerate(IDS[:3]):
            approval = Approval(
                id=ident,
                execution_id=IDS[number],
                skill="s",
                skill_class="mutating",
                args={},
                definition_hash="0" * 64,
                persona=None,
                requested_by="olga",
                signatures_required=1,
                status="pending",
                created_at=1000.0 + number,
                expires_at=5000.0,
            )
            store.approvals.insert(conn, approval)
    assert [a.id for a in store.approvals.query(id_prefix="abcd")] == [IDS[1], IDS[0]]
    assert [a.id for a in store.approvals.query(id_prefix="abce", status="pending")] == [IDS[2]]
    assert store.approvals.query(id_prefix="abce", status="approved") == []
