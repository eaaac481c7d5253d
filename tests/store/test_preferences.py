"""Console preferences per principal, on both engines; and the two reads of the executions
that the console's home and catalogue table make (the newest call of each skill, calls in one
of several statuses)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.store import Store, open_store


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    with closing(open_store(str(tmp_path / "data"), database_url)) as s:
        yield s


def test_a_preference_belongs_to_one_principal_and_the_last_choice_wins(store: Store) -> None:
    assert store.preferences.get("olga", "catalogue.view") is None
    store.preferences.set("olga", "catalogue.view", "table")
    store.preferences.set("vera", "catalogue.view", "cards")
    store.preferences.set("olga", "catalogue.view", "cards")
    store.preferences.set("olga", "catalogue.view", "table")
    assert store.preferences.get("olga", "catalogue.view") == "table"
    assert store.preferences.get("vera", "catalogue.view") == "cards"
    assert store.preferences.get("olga", "something.else") is None


def add(store: Store, skill: str, status: Status, created_at: float) -> Execution:
    execution = Execution(skill=skill, args={}, status=status, created_at=created_at)
    with store.tx() as conn:
        store.executions.insert(conn, execution, args_hash="h")
    return execution


def test_the_newest_call_of_each_skill_and_the_calls_of_several_statuses(store: Store) -> None:
    add(store, "peek", Status.SUCCEEDED, 100.0)
    newest_peek = add(store, "peek", Status.FAILED, 300.0)
    add(store, "poke", Status.TIMED_OUT, 200.0)
    newest_poke = add(store, "poke", Status.RUNNING, 250.0)
    newest = store.executions.newest_of(["peek", "poke", "never_ran"])
    assert {name: e.id for name, e in newest.items()} == {
        "peek": newest_peek.id,
        "poke": newest_poke.id,
    }
    failed, _more = store.executions.page(statuses=["failed", "timed_out"])
    assert [(e.skill, e.status) for e in failed] == [
        ("peek", Status.FAILED),
        ("poke", Status.TIMED_OUT),
    ]
