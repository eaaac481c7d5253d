"""Replica leases on both engines: taken, renewed, ended when expired, released."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ongrid_skills.store import Store, open_store
from tests.support.waiting import wait_for


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    with closing(open_store(str(tmp_path / "data"), database_url)) as s:
        yield s


def test_a_lease_lasts_its_ttl_from_the_database_clock_and_is_pushed_on_by_renewal(
    store: Store,
) -> None:
    with store.tx() as conn:
        before = store.leases.now(conn)
        store.leases.acquire(conn, "r1", "host-a", 4242, 30)
    (lease,) = store.leases.all()
    assert (lease.id, lease.host, lease.pid) == ("r1", "host-a", 4242)
    assert lease.started_at == lease.renewed_at
    assert before <= lease.started_at <= before + 5
    assert lease.expires_at == pytest.approx(lease.renewed_at + 30)
    with store.tx() as conn:
        assert store.leases.renew(conn, "r1", 60)
    (renewed,) = store.leases.all()
    assert renewed.renewed_at >= lease.renewed_at
    assert renewed.expires_at == pytest.approx(renewed.renewed_at + 60)


def test_only_expired_leases_are_ended_and_a_renewal_then_says_so(store: Store) -> None:
    with store.tx() as conn:
        store.leases.acquire(conn, "short", "h", 1, 0.2)
        store.leases.acquire(conn, "long", "h", 2, 60)

    def expired() -> bool:
        with store.read() as conn:
            now = store.leases.now(conn)
        return [lease.id for lease in store.leases.all() if lease.expires_at < now] == ["short"]

    wait_for(expired, "the short lease to expire", timeout=10)
    with store.tx() as conn:
        ended = store.leases.end_expired(conn, store.leases.now(conn))
    assert [lease.id for lease in ended] == ["short"]
    assert [lease.id for lease in store.leases.all()] == ["long"]
    with store.tx() as conn:
        assert not store.leases.renew(conn, "short", 60)
        assert store.leases.renew(conn, "long", 60)
        store.leases.release(conn, "long")
    assert store.leases.all() == []
