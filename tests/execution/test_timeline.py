"""EventHub.close_when: a call's timeline ends for its followers once its outcome is committed."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

from ongrid_skills.execution.records import Event
from ongrid_skills.execution.timeline import EventHub


def test_a_timeline_ends_for_its_followers_only_once_the_commit_settles_in_another_thread() -> None:
    async def main() -> list[int]:
        hub = EventHub()
        timeline = hub.open("e1")
        timeline.append(Event("status", {"status": "running"}))
        settled: Future[None] = Future()
        hub.close_when("e1", settled)
        seen: list[int] = []

        async def follow() -> None:
            async for seq, _event in timeline.follow():
                seen.append(seq)

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0)
        assert not follower.done() and hub.get("e1") is timeline
        threading.Thread(target=settled.set_result, args=(None,)).start()
        await asyncio.wait_for(follower, timeout=5)
        assert hub.get("e1") is None
        return seen

    assert asyncio.run(main()) == [1]


def test_a_timeline_whose_commit_already_settled_closes_at_once() -> None:
    async def main() -> None:
        hub = EventHub()
        hub.open("e1")
        settled: Future[None] = Future()
        settled.set_result(None)
        hub.close_when("e1", settled)
        assert len(hub) == 0

    asyncio.run(main())


def test_a_commit_settling_after_the_loop_closed_still_takes_the_timeline_out_of_the_hub() -> None:
    hub = EventHub()
    settled: Future[None] = Future()

    async def main() -> None:
        hub.open("e1")
        hub.close_when("e1", settled)

    asyncio.run(main())  # the loop closes with the commit still pending
    assert len(hub) == 1
    settled.set_result(None)
    assert len(hub) == 0


def test_a_commit_settling_while_the_loop_is_stopped_but_not_closed_leaves_no_timeline_behind() -> (
    None
):
    hub = EventHub()
    settled: Future[None] = Future()
    loop = asyncio.new_event_loop()

    async def main() -> None:
        hub.open("e1")
        hub.close_when("e1", settled)

    try:
        loop.run_until_complete(main())  # stopped, not closed: a callback posted now never runs
        settled.set_result(None)
        assert len(hub) == 0
    finally:
        loop.close()
