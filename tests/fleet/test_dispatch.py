"""The manager's reading of a call's messages (SPEC §17): in their numbered order.

A worker publishes what it has queued without waiting for each acknowledgement in turn; after a
failed acknowledgement it publishes again from that message on, so JetStream may store a
message after a later one. The manager must still put them in the call's timeline in order,
and end the call on its outcome only once every earlier message came in.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import nats

from ongrid_skills.execution.records import Event, Execution
from ongrid_skills.fleet.dispatch import Fleet, Pending
from ongrid_skills.fleet.signing import manager_key
from ongrid_skills.metrics import Metrics
from tests.support.nats import NatsServer
from tests.support.server import make_settings
from tests.support.waiting import until


def message(seq: int, kind: str, data: dict[str, object]) -> bytes:
    return json.dumps({"seq": seq, "type": kind, "data": data, "ts": time.time()}).encode()


def received(
    tmp_path: Path, nats_server: NatsServer, fleet_prefix: str, sent: list[tuple[int, bytes]]
) -> tuple[list[Event], object]:
    """What a manager's call ``c1`` sees of the publications ``sent`` (the seq in its message
    id, its body), published in that order: its timeline's events and its outcome."""
    settings = make_settings(
        tmp_path, tmp_path, nats_url=nats_server.url, fleet_prefix=fleet_prefix
    )

    async def scenario() -> tuple[list[Event], object]:
        fleet = Fleet(settings, manager_key(settings), "m1", Metrics())
        await fleet.start()
        seen: list[Event] = []
        execution = Execution(skill="noop", args={}, id="c1")
        loop = asyncio.get_running_loop()
        pending = Pending(execution, "web-1", seen.append, loop.create_future())
        fleet.pending["c1"] = pending
        nc = await nats.connect(nats_server.url)
        try:
            js = nc.jetstream()
            subject = f"{fleet.names.reply_prefix('m1')}.c1"
            for first, body in sent:
                await js.publish(subject, body, headers={"Nats-Msg-Id": f"c1:{first}"})
            outcome = await asyncio.wait_for(pending.done, 10)
            await until(lambda: len(seen) >= 3, "the events of the call", 5)
        finally:
            await nc.close()
            await fleet.close()
        return seen, outcome

    return asyncio.run(scenario())


def test_messages_stored_out_of_order_enter_the_timeline_in_order(
    tmp_path: Path, nats_server: NatsServer, fleet_prefix: str
) -> None:
    sent = [
        (1, "accepted", {"host": "web-1"}),
        (3, "stderr", {"line": "second"}),
        (4, "outcome", {"status": "succeeded", "has_result": False}),
        (2, "stderr", {"line": "first"}),
    ]
    publications = [(seq, message(seq, kind, data)) for seq, kind, data in sent]
    seen, outcome = received(tmp_path, nats_server, fleet_prefix, publications)
    assert [(e.type, e.data.get("line")) for e in seen] == [
        ("accepted", None),
        ("stderr", "first"),
        ("stderr", "second"),
    ]
    assert outcome == ({"status": "succeeded", "has_result": False}, None)


def test_a_batch_stored_before_an_earlier_message_enters_the_timeline_in_order(
    tmp_path: Path, nats_server: NatsServer, fleet_prefix: str
) -> None:
    end = b",".join(
        [
            message(3, "stderr", {"line": "second"}),
            message(4, "result_part", {"text": '{"n": 1}'}),
            message(5, "outcome", {"status": "succeeded", "has_result": True}),
        ]
    )
    sent = [
        (1, message(1, "accepted", {"host": "web-1"})),
        (3, b'{"batch":[' + end + b"]}"),
        (2, message(2, "stderr", {"line": "first"})),
    ]
    seen, outcome = received(tmp_path, nats_server, fleet_prefix, sent)
    assert [(e.type, e.data.get("line")) for e in seen] == [
        ("accepted", None),
        ("stderr", "first"),
        ("stderr", "second"),
    ]
    assert outcome == ({"status": "succeeded", "has_result": True}, '{"n": 1}')
