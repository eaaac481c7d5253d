"""The shared timer of a runner's timeouts: each deadline fires once, on time, never after its
discard, whatever order the deadlines were added in."""

from __future__ import annotations

import asyncio
from typing import Any

import uvloop

from ongrid_skills.execution.deadlines import Deadlines, LoopDeadlines
from tests.support.waiting import until


def _fired_at(loop: asyncio.AbstractEventLoop, fired: dict[str, float], name: str) -> Any:
    return lambda: fired.setdefault(name, loop.time())


def test_each_deadline_fires_once_no_earlier_than_its_delay_in_any_order_of_adding() -> None:
    async def scenario() -> tuple[dict[str, float], dict[str, float]]:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        fired: dict[str, float] = {}
        added: dict[str, float] = {}
        everything = asyncio.Event()
        for name, delay in (("late", 0.25), ("early", 0.05), ("middle", 0.15), ("twin", 0.05)):
            added[name] = loop.time() + delay

            def done(name: str = name) -> None:
                fired[name] = loop.time()
                if len(fired) == 4:
                    everything.set()

            deadlines.add(name, delay, done)
        await asyncio.wait_for(everything.wait(), 5)
        assert not deadlines.due
        return fired, added

    fired, added = asyncio.run(scenario())
    assert set(fired) == {"late", "early", "middle", "twin"}
    for name, when in fired.items():
        assert when >= added[name] - 0.002, f"{name} fired before its deadline"
    assert fired["early"] <= fired["middle"] <= fired["late"]


def test_a_discarded_deadline_is_never_called_back_and_the_others_still_fire() -> None:
    async def scenario() -> dict[str, float]:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        fired: dict[str, float] = {}
        deadlines.add("kept", 0.1, _fired_at(loop, fired, "kept"))
        deadlines.add("gone", 0.02, _fired_at(loop, fired, "gone"))  # the timer is armed for it
        deadlines.discard("gone")
        deadlines.discard("never added")  # a no-op
        # The timer armed for the discarded deadline fires, finds nothing, re-arms for the other.
        await until(lambda: deadlines.armed_at == deadlines.due["kept"][0], "the re-arm", 5)
        assert fired == {}
        await until(lambda: "kept" in fired, "the kept deadline", 5)
        return fired

    assert set(asyncio.run(scenario())) == {"kept"}


def test_a_deadline_added_later_but_due_sooner_fires_at_its_own_time() -> None:
    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        fired: dict[str, float] = {}
        deadlines.add("long", 30.0, _fired_at(loop, fired, "long"))  # arms the timer at +30 s
        start = loop.time()
        deadlines.add("short", 0.05, _fired_at(loop, fired, "short"))
        await until(lambda: "short" in fired, "the short deadline", 5)
        assert "long" not in fired and "long" in deadlines.due  # still waiting, re-armed
        assert deadlines.armed_at == deadlines.due["long"][0]
        return fired["short"] - start

    assert 0.045 <= asyncio.run(scenario()) < 2


def test_a_callback_that_raises_goes_to_the_loop_handler_and_the_others_still_fire() -> None:
    async def scenario() -> tuple[dict[str, float], list[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        deadlines = Deadlines(loop)
        fired: dict[str, float] = {}

        def broken() -> None:
            raise RuntimeError("boom")

        deadlines.add("broken", 0.02, broken)
        deadlines.add("fine", 0.02, _fired_at(loop, fired, "fine"))
        deadlines.add("later", 0.08, _fired_at(loop, fired, "later"))
        await until(lambda: "later" in fired, "the later deadline", 5)
        return fired, reported

    fired, reported = asyncio.run(scenario())
    assert set(fired) == {"fine", "later"}
    assert [str(context["exception"]) for context in reported] == ["boom"]


def test_deadlines_cancelling_when_idle_leave_no_timer_to_wake_the_loop_once_all_are_gone() -> None:
    # A quiet start's deadlines (5 ms, calls often shorter): a timer left armed after the last
    # call ended would wake the loop in the middle of the next one, for nothing.
    async def scenario() -> tuple[bool, bool, list[str]]:
        loop = asyncio.get_running_loop()
        kept, idle = Deadlines(loop), Deadlines(loop, idle_cancel=True)
        fired: list[str] = []
        for name, deadlines in (("kept", kept), ("idle", idle)):
            deadlines.add("a", 0.05, lambda name=name: fired.append(name))
            deadlines.add("b", 0.10, lambda name=name: fired.append(name))
            deadlines.discard("a")
            deadlines.discard("b")
        armed = kept.timer is not None, idle.timer is not None
        await asyncio.sleep(0.15)
        return armed[0], armed[1], fired

    still_armed, idle_armed, fired = asyncio.run(scenario())
    assert not idle_armed and fired == []
    assert still_armed  # the default keeps its timer: it fires once for nothing


def test_a_runner_keeps_one_deadlines_per_loop_and_a_busy_one_is_not_taken_over() -> None:
    per_runner = LoopDeadlines()
    first_loop, second_loop = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        first = per_runner.on(first_loop)
        assert per_runner.on(first_loop) is first
        first.due["a call"] = (first_loop.time() + 30, lambda: None)  # a call runs there
        other = per_runner.on(second_loop)
        assert other is not first and other.loop is second_loop
        assert per_runner.kept is first  # still in use on its loop: kept
        first.discard("a call")
        moved = per_runner.on(second_loop)
        assert moved.loop is second_loop and per_runner.kept is moved
    finally:
        first_loop.close()
        second_loop.close()


class _Counted(Deadlines):
    """Deadlines that count the passes of their timer."""

    __slots__ = ("passes",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.passes = 0

    def _fire(self) -> None:
        self.passes += 1
        super()._fire()


def test_on_uvloop_a_timer_firing_early_waits_a_millisecond_instead_of_spinning() -> None:
    # uvloop counts whole milliseconds: a timer may fire half a millisecond before its deadline.
    # Re-armed at that same deadline it would fire again on every loop iteration until then.
    async def scenario() -> list[tuple[int, float]]:
        loop = asyncio.get_running_loop()
        seen: list[tuple[int, float]] = []
        for delay in (0.0505, 0.0302, 0.0107, 0.0401, 0.0209, 0.0503, 0.0306, 0.0108):
            deadlines = _Counted(loop)
            fired: dict[str, float] = {}
            due = loop.time() + delay
            deadlines.add("call", delay, _fired_at(loop, fired, "call"))
            await until(lambda fired=fired: "call" in fired, "the deadline", 5)
            seen.append((deadlines.passes, fired["call"] - due))
        return seen

    for passes, late_by in uvloop.run(scenario()):
        assert passes <= 3, f"the timer ran {passes} times for one deadline"
        assert late_by >= 0, "fired before its deadline"
