"""The execution repository on both engines: rows and events round-trip, the claim of an approved
call has one winner, and the rows of a replica are held by its lease."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status
from ongrid_skills.store import Store, open_store


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "audit.key"
    path.write_text("7a" * 32 + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def store(tmp_path: Path, database_url: str | None, key: Path) -> Iterator[Store]:
    with closing(open_store(str(tmp_path / "data"), database_url, audit_key_file=str(key))) as s:
        yield s


def insert(
    store: Store,
    status: Status = Status.RUNNING,
    replica: str | None = None,
    requested_by: str = "olga",
) -> Execution:
    execution = Execution(skill="peek", args={"x": "é ✓"}, status=status, requested_by=requested_by)
    with store.tx() as conn:
        store.executions.insert(conn, execution, args_hash="h", replica_id=replica)
    return execution


def test_a_row_and_its_events_round_trip(store: Store) -> None:
    execution = insert(store)
    with store.tx() as conn:
        store.executions.add_events(
            conn, execution.id, [(1, Event("stderr", {"line": "un"})), (2, Event("progress", {}))]
        )
        execution.status = Status.FAILED
        execution.error = ErrorInfo("failed", "non", {"k": [1]})
        execution.result_text = '{"a": 1}'
        assert store.executions.update(conn, execution)
    found = store.executions.get(execution.id)
    assert found is not None
    assert (found.status, found.args, found.result) == (Status.FAILED, {"x": "é ✓"}, {"a": 1})
    assert found.error == ErrorInfo("failed", "non", {"k": [1]})
    assert [(seq, e.type, e.data) for seq, e in store.executions.events(execution.id)] == [
        (1, "stderr", {"line": "un"}),
        (2, "progress", {}),
    ]
    assert [seq for seq, _e in store.executions.events(execution.id, after=1)] == [2]
    with store.read() as conn:
        assert store.executions.last_seq(conn, execution.id) == 2


def test_pages_go_newest_first_through_their_cursors(store: Store) -> None:
    made = [insert(store).id for _ in range(5)]
    first, cursor = store.executions.page(limit=3)
    assert cursor is not None
    second, end = store.executions.page(limit=3, cursor=cursor)
    assert [e.id for e in first + second] == list(reversed(made))
    assert end is None
    assert store.executions.count_by_status() == {"running": 5}


def test_a_page_of_one_requesters_calls_keeps_to_them_through_its_cursor(store: Store) -> None:
    olga = [insert(store).id for _ in range(3)]
    insert(store, requested_by="oscar")
    first, cursor = store.executions.page(limit=2, requested_by="olga")
    second, end = store.executions.page(limit=2, requested_by="olga", cursor=cursor)
    assert [e.id for e in first + second] == list(reversed(olga))
    assert end is None
    assert store.executions.page(requested_by="nobody") == ([], None)


def test_of_many_claims_of_one_approved_call_at_once_exactly_one_wins(
    tmp_path: Path, database_url: str | None, key: Path, store: Store
) -> None:
    """Two stores (two processes or replicas) claiming the same rows at the same moment."""
    other = open_store(
        str(tmp_path / ("data" if database_url is None else "other")),
        database_url,
        audit_key_file=str(key),
    )
    rows = [insert(store, Status.PENDING_APPROVAL).id for _ in range(20)]
    wins: dict[str, list[str]] = {"one": [], "two": []}
    barrier = threading.Barrier(2)

    def claim(name: str, claimer: Store) -> None:
        barrier.wait()
        for execution_id in rows:
            with claimer.tx() as conn:
                if claimer.executions.claim(
                    conn, execution_id, Status.PENDING_APPROVAL, Status.RUNNING, replica_id=name
                ):
                    wins[name].append(execution_id)

    try:
        threads = [
            threading.Thread(target=claim, args=("one", store)),
            threading.Thread(target=claim, args=("two", other)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        other.close()
    assert sorted(wins["one"] + wins["two"]) == sorted(rows)
    for name, won in wins.items():
        assert all(store.executions.replica_of(e) == name for e in won)


def test_an_update_held_by_a_replica_is_refused_once_the_row_is_not_its_running_row(
    store: Store,
) -> None:
    mine = insert(store, replica="r1")
    mine.status = Status.SUCCEEDED
    with store.tx() as conn:
        assert not store.executions.update(conn, mine, held_by="r2")
        assert store.executions.update(conn, mine, held_by="r1")
        assert not store.executions.update(conn, mine, held_by="r1")  # no longer running
    found = store.executions.get(mine.id)
    assert found is not None
    assert found.status is Status.SUCCEEDED


def test_orphans_are_the_running_rows_no_live_lease_holds(store: Store) -> None:
    with store.tx() as conn:
        store.leases.acquire(conn, "live", "host", 1, 60)
        store.leases.acquire(conn, "dead", "host", 2, -1)  # expired already
    held = insert(store, replica="live")
    of_dead = insert(store, replica="dead")
    unknown = insert(store, replica="gone")
    legacy = insert(store)  # before the store was shared
    finished = insert(store, Status.SUCCEEDED, replica="dead")
    with store.read() as conn:
        found = store.executions.orphans(conn, store.leases.now(conn))
    assert {(e.id, replica) for e, replica in found} == {
        (of_dead.id, "dead"),
        (unknown.id, "gone"),
        (legacy.id, None),
    }
    assert held.id not in {e.id for e, _r in found}
    assert finished.id not in {e.id for e, _r in found}
