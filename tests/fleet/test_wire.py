"""What a worker sends back about a call (SPEC §17): numbered messages, those queued together in one
publication to a manager that reads them so, one message per publication to one that does not
(an older manager). Real worker processes, a real NATS server, and what any party on the bus sees
of the events stream."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.fleet import bus
from ongrid_skills.fleet.inventory import definition_hash
from ongrid_skills.fleet.signing import Call, manager_key, new_nonce, sign
from ongrid_skills.fleet.wire import BATCH_BYTES, PART_CHARS, Sender, decode
from tests.support.fleet import Fleet, Spy, WorkerProcess, host_skill, publish, serving_manager
from tests.support.nats import NatsServer
from tests.support.server import Server
from tests.support.skills import load
from tests.support.waiting import wait_for

#: NATS's default cap on one message's payload.
MAX_PAYLOAD = 1024 * 1024


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "worker-skills"
    host_skill(root, "say_hi", "echo '{\"hi\": true}'")
    return root


@pytest.fixture
def alpha(fleet: Fleet, skills: Path) -> WorkerProcess:
    return fleet.worker("alpha", skills)


@pytest.fixture
def manager(fleet: Fleet, skills_root: Path, alpha: WorkerProcess) -> Iterator[Server]:
    with serving_manager(fleet, skills_root, "say_hi") as server:
        yield server


def publications(spy: Spy, call_id: str) -> list[list[dict[str, Any]]]:
    """The messages of each publication about ``call_id``, as the spy heard them."""
    out = []
    for data, headers in list(spy.messages):
        if headers.get("Nats-Msg-Id", "").startswith(f"{call_id}:"):
            body = json.loads(data)
            out.append(body.get("batch", [body]))
    return out


def test_a_short_calls_end_reaches_the_manager_in_one_publication(
    fleet: Fleet, manager: Server
) -> None:
    spy = Spy(fleet.nats.url, f"{fleet.prefix}.event.>")
    try:
        done = manager.call(
            "POST", "/v1/skills/say_hi/execute", "olga", json={"args": {"host": "alpha"}}
        ).json()
        assert done["status"] == "succeeded", done
        assert done["result"] == {"hi": True}

        def ended() -> list[list[dict[str, Any]]] | None:
            sent = publications(spy, done["id"])
            return sent if sent and sent[-1][-1]["type"] == "outcome" else None

        sent = wait_for(ended, "the call's outcome on the bus")
    finally:
        spy.close()
    # Its last status, its stdout and its outcome: one message for JetStream to store and
    # deliver, not three; every message numbered in order across the publications.
    assert [m["type"] for m in sent[-1]] == ["status", "result_part", "outcome"]
    assert sent[0][0]["type"] == "accepted"
    numbers = [m["seq"] for publication in sent for m in publication]
    assert numbers == list(range(1, len(numbers) + 1))
    assert len(sent) <= 3  # accepted (alone or with "running"), then the end


def test_a_call_without_the_batches_header_is_answered_one_message_per_publication(
    fleet: Fleet, alpha: WorkerProcess, skills: Path
) -> None:
    # A manager older than batches signs its calls alike but sends no Ongrid-Batches header:
    # it reads one message per publication, and gets them so.
    registry, _ = load(external=[skills])
    reply = bus.Names(fleet.prefix).reply_prefix("older")
    spy = Spy(fleet.nats.url, f"{reply}.>")
    now = time.time()
    call = Call(
        kind="call", id=new_nonce(), host="alpha", skill="say_hi",
        definition_hash=definition_hash(registry.get("say_hi")), skill_class="safe",
        signatures=0, args={}, nonce=new_nonce(), issued_at=now, expires_at=now + 30,
        reply=reply,
    )  # fmt: skip
    try:
        body, headers = sign(manager_key(fleet.settings), call)
        publish(fleet.nats.url, bus.Names(fleet.prefix).call_subject("alpha"), body, headers)

        def ended() -> list[tuple[bytes, dict[str, str]]] | None:
            sent = list(spy.messages)
            return sent if sent and json.loads(sent[-1][0]).get("type") == "outcome" else None

        sent = wait_for(ended, "the worker's outcome of the call")
    finally:
        spy.close()
    bodies = [json.loads(data) for data, _ in sent]
    assert all("batch" not in body for body in bodies)
    assert [b["type"] for b in bodies] == [
        "accepted", "status", "status", "result_part", "outcome"
    ]  # fmt: skip
    assert [h["Nats-Msg-Id"] for _, h in sent] == [f"{call.id}:{n}" for n in range(1, 6)]
    assert bodies[-1]["data"]["status"] == "succeeded"


def test_a_large_stdout_is_batched_in_publications_nats_accepts_and_read_back_whole(
    nats_server: NatsServer, fleet_prefix: str
) -> None:
    names = bus.Names(fleet_prefix)
    subject = f"{names.reply_prefix('m1')}.c1"
    text = json.dumps(["x" * 1000] * 2500)  # 2.5 MB of stdout: 26 parts of 100,000 chars

    async def scenario() -> list[tuple[bytes, dict[str, str]]]:
        nc = await nats.connect(nats_server.url)
        try:
            js = nc.jetstream()
            await bus.ensure(js, names, 60)
            heard = await js.subscribe(subject, ordered_consumer=True)
            sender = Sender(js, subject, "c1", batched=True)
            sender.send("accepted", {"host": "alpha"})
            execution = Execution(skill="big", args={}, id="c1")
            execution.status, execution.result_text = Status.SUCCEEDED, text
            sender.finish(execution)
            await sender.close()
            out: list[tuple[bytes, dict[str, str]]] = []
            while not out or decode(out[-1][0])[-1].type != "outcome":
                msg = await heard.next_msg(timeout=10)
                out.append((msg.data, dict(msg.headers or {})))
            return out
        finally:
            await nc.close()

    sent = asyncio.run(scenario())
    assert all(len(data) <= MAX_PAYLOAD for data, _ in sent)
    assert all(len(data) <= BATCH_BYTES + 64 for data, _ in sent)  # the batch's own brackets
    messages = [m for data, _ in sent for m in decode(data)]
    assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
    parts = [m.data["text"] for m in messages if m.type == "result_part"]
    assert len(parts) == -(-len(text) // PART_CHARS)
    assert "".join(parts) == text
    assert messages[-1].type == "outcome" and messages[-1].data["has_result"] is True
    firsts = [int(h["Nats-Msg-Id"].split(":")[1]) for _, h in sent]
    sizes = [len(decode(data)) for data, _ in sent]
    assert firsts == [1 + sum(sizes[:i]) for i in range(len(sent))]  # the id of its first
