"""The timeouts of a runner's calls on one event loop, kept by one timer.

Every call has a deadline (its skill's ``timeout_seconds``), and almost every call ends long
before it. Arming an asyncio timer per call and cancelling it at the end cost about 13 µs of the
manager's CPU per call (``call_later``, a heap push, ``cancel``, and the cancelled handle left in
the heap until it surfaces), on the path of every serial call (``bench/README.md``). Here the
deadlines of a runner's calls on one loop share a single timer, armed at the earliest deadline:
a call adds its deadline (a dict entry, and a timer only when it is the earliest so far) and
discards it when it ends (a dict pop; the timer stays). When the timer fires, the calls whose
deadline has passed are called back and the timer is armed again at the earliest deadline left
(at least a millisecond on), so no call is timed out early and none more than a millisecond
later than its own timer would have done it.

It must never call back a call that was discarded, and never call back before its deadline
(a millisecond after it at most, see :meth:`Deadlines._fire`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

Callback = Callable[[], None]
_MIN_REARM = 0.001  # seconds: the least a re-armed timer waits (see Deadlines._fire)


class Deadlines:
    """Deadlines on ``loop``, each with the callback to run when it passes; loop thread only.

    ``idle_cancel``: cancel the timer when the last deadline is discarded, for deadlines that
    are short beside the calls they belong to (a quiet start's 5 ms): left armed, it would fire
    in the middle of a later call for nothing."""

    __slots__ = ("armed_at", "due", "idle_cancel", "loop", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, idle_cancel: bool = False) -> None:
        self.loop = loop
        self.idle_cancel = idle_cancel
        self.due: dict[object, tuple[float, Callback]] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.armed_at = float("inf")  # when the timer fires (inf: no timer)

    def add(self, key: object, delay: float, callback: Callback) -> None:
        """Call ``callback`` once ``delay`` seconds have passed, unless ``key`` is discarded."""
        when = self.loop.time() + delay
        self.due[key] = (when, callback)
        if when < self.armed_at:
            self._arm(when)

    def discard(self, key: object) -> None:
        """Forget ``key``'s deadline (its call ended); a no-op when it has none."""
        due = self.due
        due.pop(key, None)
        if not due and self.idle_cancel and self.timer is not None:
            self.timer.cancel()
            self.timer = None
            self.armed_at = float("inf")

    def _arm(self, when: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.armed_at = when
        self.timer = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self.timer = None
        self.armed_at = float("inf")
        now = self.loop.time()
        passed = [key for key, (when, _cb) in self.due.items() if when <= now]
        try:
            for key in passed:
                entry = self.due.pop(key, None)  # an earlier callback may have discarded it
                if entry is None:
                    continue
                try:
                    entry[1]()
                except Exception as exc:  # one call's failure must not keep the others running
                    self.loop.call_exception_handler(
                        {"message": "a timeout failed", "exception": exc}
                    )
        finally:  # even past a KeyboardInterrupt: the deadlines left must still be watched
            if self.due:
                # Why not at the earliest deadline itself: uvloop fires a timer up to half a
                # millisecond early (it counts whole milliseconds), and a timer re-armed at a
                # deadline a fraction of a millisecond away would fire again and again until
                # the clock reaches it. So at least a millisecond on: a timeout may end a call
                # up to a millisecond late, never early.
                soonest = min(when for when, _cb in self.due.values())
                self._arm(max(soonest, now + _MIN_REARM))


class LoopDeadlines:
    """A runner's :class:`Deadlines` for the loop its calls run on."""

    __slots__ = ("idle_cancel", "kept")

    def __init__(self, idle_cancel: bool = False) -> None:
        self.kept: Deadlines | None = None
        self.idle_cancel = idle_cancel

    def on(self, loop: asyncio.AbstractEventLoop) -> Deadlines:
        """``loop``'s deadlines. A runner whose calls moved to another loop keeps the new
        loop's; while the old one still holds deadlines (its calls run in another thread), the
        new loop's call gets deadlines of its own, not kept."""
        kept = self.kept
        if kept is not None and kept.loop is loop:
            return kept
        fresh = Deadlines(loop, self.idle_cancel)
        if kept is None or not kept.due:
            self.kept = fresh
        return fresh


__all__ = ["Deadlines", "LoopDeadlines"]
