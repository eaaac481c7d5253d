"""The approval feed: changes fanned out in order, read back only when someone listens, and a
listener that falls too far behind dropped rather than grown without bound."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ongrid_skills.approvals.feed import ApprovalFeed


@dataclass
class Request:
    id: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status}


class Reads:
    """A store stand-in that counts reads: requests by id."""

    def __init__(self, **statuses: str) -> None:
        self.statuses = statuses
        self.count = 0

    def __call__(self, approval_id: str) -> Request | None:
        self.count += 1
        status = self.statuses.get(approval_id)
        return Request(approval_id, status) if status else None


def test_every_listener_gets_every_change_in_order() -> None:
    async def scenario() -> None:
        reads = Reads(a="pending", b="approved")
        feed = ApprovalFeed(reads)
        with feed.listen() as first, feed.listen() as second:
            feed.tell("requested", "a")
            feed.tell("approved", "b")
            for listener in (first, second):
                assert await listener.get() == ("requested", {"id": "a", "status": "pending"})
                assert await listener.get() == ("approved", {"id": "b", "status": "approved"})
        assert len(feed) == 0

    asyncio.run(scenario())


def test_a_waiting_listener_wakes_on_the_next_change() -> None:
    async def scenario() -> None:
        feed = ApprovalFeed(Reads(a="pending"))
        with feed.listen() as listener:
            waiting = asyncio.create_task(listener.get())
            await asyncio.sleep(0)
            assert not waiting.done()
            feed.tell("requested", "a")
            assert await asyncio.wait_for(waiting, 5) == (
                "requested",
                {"id": "a", "status": "pending"},
            )

    asyncio.run(scenario())


def test_nobody_listening_reads_nothing_and_a_vanished_request_is_not_told() -> None:
    async def scenario() -> None:
        reads = Reads(a="pending")
        feed = ApprovalFeed(reads)
        feed.tell("requested", "a")
        assert reads.count == 0
        with feed.listen() as listener:
            feed.tell("requested", "gone")
            feed.tell("requested", "a")
            assert await listener.get() == ("requested", {"id": "a", "status": "pending"})
        assert reads.count == 2

    asyncio.run(scenario())


def test_a_listener_that_falls_behind_its_backlog_is_lost_not_grown() -> None:
    async def scenario() -> None:
        feed = ApprovalFeed(Reads(a="pending"))
        with feed.listen(backlog=3) as slow, feed.listen() as fast:
            for _ in range(4):
                feed.tell("signed", "a")
            assert slow.lost
            assert await slow.get() is None
            assert not fast.lost
            assert [await fast.get() for _ in range(4)] == [
                ("signed", {"id": "a", "status": "pending"})
            ] * 4

    asyncio.run(scenario())
