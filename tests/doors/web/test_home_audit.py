"""The home's audit verdict never holds the page for long: the verification (which reads every
entry) runs in the background, one at a time, and the page shows the last verdict it has."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ongrid_skills.doors.web.home import AuditCheck
from ongrid_skills.store import Store, open_store
from tests.support.waiting import wait_for


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with closing(open_store(str(tmp_path / "data"))) as opened:
        with opened.tx() as conn:
            for i in range(2000):
                opened.audit.append(conn, "tester", "test.entry", f"s{i}", {"i": i})
        yield opened


def test_the_page_does_not_wait_for_a_verification_past_its_bound(store: Store) -> None:
    check = AuditCheck(max_age=300, wait=0)

    async def scenario() -> tuple[object, object, int]:
        first = await check.state(store)  # started, not waited for
        started = check.running
        again = await check.state(store)  # the same verification, not a second one
        assert check.running is started
        assert started is not None
        await started
        done = await check.state(store)
        assert done is not None
        return first, again, done.result.entries

    first, again, entries = asyncio.run(scenario())
    assert (first, again) == (None, None)
    assert entries >= 2000


def test_a_verdict_older_than_its_age_is_verified_again(store: Store) -> None:
    check = AuditCheck(max_age=0, wait=5)

    async def two_looks() -> tuple[float, float]:
        first = await check.state(store)
        assert first is not None
        wait_for(lambda: check.running is not None and check.running.done(), "the first check")
        second = await check.state(store)
        assert second is not None
        return first.at, second.at

    first_at, second_at = asyncio.run(two_looks())
    assert second_at > first_at
