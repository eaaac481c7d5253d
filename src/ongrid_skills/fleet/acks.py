"""The manager's acknowledgements of the events stream's messages, written together.

A call's first messages (``accepted``, ``running``) arrive while its process runs on the host;
acknowledging them at once costs the NATS server a wake-up and a write then, on the machine
where the call is running. :class:`Acks` holds them instead and writes them with the
acknowledgement of the publication that ends the call (or after :data:`HOLD_SECONDS`, for a
call that runs longer), in one write. Nothing is lost by the wait: an acknowledgement only
tells JetStream it may drop the message (unacknowledged, it is redelivered after the consumer's
``ack_wait`` of 30 s, which the manager drops as a repeat). This module decides nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib

from nats.aio.msg import Msg

#: The longest a handled message waits for its acknowledgement.
HOLD_SECONDS = 0.05
#: More held than this: written at once.
MAX_HELD = 256


class Acks:
    """Acknowledgements held a moment, then written together."""

    def __init__(self, hold: float = HOLD_SECONDS) -> None:
        self.hold_seconds = hold
        self._held: list[Msg] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: set[asyncio.Task[None]] = set()

    def hold(self, msg: Msg) -> None:
        """Acknowledge ``msg`` with the next :meth:`flush`, within :attr:`hold_seconds`."""
        self._held.append(msg)
        if len(self._held) >= MAX_HELD:
            self._soon()
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.hold_seconds, self._soon)

    async def flush(self) -> None:
        """Acknowledge every held message now (the client writes them in one go)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held, self._held = self._held, []
        for msg in held:
            with contextlib.suppress(Exception):  # lost: JetStream redelivers it, dropped then
                await msg.ack()

    def _soon(self) -> None:
        self._timer = None
        task = asyncio.get_running_loop().create_task(self.flush())
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)
