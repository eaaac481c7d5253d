"""The manager's acknowledgements of a call's messages (SPEC §17): held a moment and written
together, never left out. A message left unacknowledged would come back after the consumer's
ack wait (30 s) and stay in the interest stream until then."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import nats

from ongrid_skills.execution.records import Execution
from ongrid_skills.fleet.acks import HOLD_SECONDS
from ongrid_skills.fleet.dispatch import Fleet, Pending
from ongrid_skills.fleet.signing import manager_key
from ongrid_skills.metrics import Metrics
from tests.support.nats import NatsServer
from tests.support.server import make_settings
from tests.support.waiting import until


def message(seq: int, kind: str, data: dict[str, object]) -> bytes:
    return json.dumps({"seq": seq, "type": kind, "data": data, "ts": time.time()}).encode()


def test_every_message_of_a_call_is_acknowledged_the_first_ones_within_the_hold(
    tmp_path: Path, nats_server: NatsServer, fleet_prefix: str
) -> None:
    settings = make_settings(
        tmp_path, tmp_path, nats_url=nats_server.url, fleet_prefix=fleet_prefix
    )

    async def scenario() -> list[float]:
        fleet = Fleet(settings, manager_key(settings), "m1", Metrics())
        await fleet.start()
        execution = Execution(skill="noop", args={}, id="c1")
        loop = asyncio.get_running_loop()
        pending = Pending(execution, "web-1", lambda _e: None, loop.create_future())
        fleet.pending["c1"] = pending
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        stream, consumer = fleet.names.events_stream, fleet.names.manager_consumer("m1")

        async def all_acknowledged(since: float) -> float:
            while (await js.consumer_info(stream, consumer)).num_ack_pending:
                assert time.monotonic() - since < 5, "a message left unacknowledged"
                await asyncio.sleep(0.005)
            return time.monotonic() - since

        waits = []
        try:
            subject = f"{fleet.names.reply_prefix('m1')}.c1"
            await js.publish(subject, message(1, "accepted", {"host": "web-1"}))
            await until(pending.accepted.is_set, "the call to be taken", 5)
            waits.append(await all_acknowledged(time.monotonic()))  # the call runs on
            await js.publish(subject, message(2, "status", {"status": "running"}))
            await js.publish(subject, message(3, "outcome", {"status": "succeeded"}))
            await asyncio.wait_for(pending.done, 5)
            waits.append(await all_acknowledged(time.monotonic()))  # the call ended
            # A message about no call of this manager's (ended, or never its own).
            sent = time.monotonic()
            await js.publish(f"{fleet.names.reply_prefix('m1')}.gone", message(1, "x", {}))
            waits.append(await all_acknowledged(sent))
        finally:
            await nc.close()
            await fleet.close()
        return waits

    waits = asyncio.run(scenario())
    assert all(wait < HOLD_SECONDS + 1.0 for wait in waits), waits  # the hold, and the lag
