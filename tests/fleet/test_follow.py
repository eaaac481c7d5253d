"""The timeline of a call followed from any replica: the same numbered events, in order.

Two `serve` replicas on one PostgreSQL database; the call runs on one, and a client of each
follows its SSE timeline from while it runs to its end (replayed events, then live ones).
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.support.replicas import Replica, ReplicaSet
from tests.support.skills import MakeSkill
from tests.support.waiting import wait_for

# One stderr line, then waits for a file named ``go`` in its folder, then two more lines.
TALK = """#!/bin/sh
cat >/dev/null
echo "one" >&2
while [ ! -e go ]; do sleep 0.02; done
echo "two" >&2
echo "three" >&2
echo '{"said": 3}'
"""

Message = tuple[str, str | None, str]  # (event, id, data)


class Follower(threading.Thread):
    """Reads one execution's SSE stream to its ``end`` message, keeping every message."""

    def __init__(self, replica: Replica, execution_id: str) -> None:
        super().__init__(daemon=True)
        self.replica = replica
        self.execution_id = execution_id
        self.messages: list[Message] = []

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.replica.tokens['vera']}"}
        url = f"{self.replica.serve.url}/v1/executions/{self.execution_id}/events"
        fields: dict[str, str] = {}
        with httpx.stream("GET", url, headers=headers, timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith(":"):
                    continue  # a keep-alive comment
                if line:
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
                    continue
                if fields:
                    self.messages.append((fields["event"], fields.get("id"), fields["data"]))
                    if fields["event"] == "end":
                        return
                    fields = {}

    def saw(self, text: str) -> bool:
        return any(text in data for _event, _id, data in list(self.messages))


def test_a_call_running_on_one_replica_is_followed_from_the_other_with_the_same_events(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    folder = make_skill("talk", TALK)
    a, b = replicas.start("a"), replicas.start("b")
    started = a.call("POST", "/v1/skills/talk/execute", "olga", json={"wait": False})
    assert started.status_code == 202, started.text
    execution_id = started.json()["id"]
    try:
        here, there = Follower(a, execution_id), Follower(b, execution_id)
        here.start()
        there.start()
        wait_for(lambda: there.saw('"one"'), "the other replica to stream the first line")
        assert b.execution(execution_id)["status"] == "running"  # followed live, not replayed
        refused = b.call("POST", f"/v1/executions/{execution_id}/cancel", "olga")
        assert refused.status_code == 409
        assert "runs in another manager process" in refused.json()["error"]["message"]
    finally:
        (folder / "go").touch()
    here.join(timeout=30)
    there.join(timeout=30)

    assert there.messages == here.messages
    events = [(event, data) for event, _id, data in here.messages]
    assert [event for event, _data in events] == [
        "status",
        "stderr",
        "stderr",
        "stderr",
        "status",
        "end",
    ]
    ids = [int(i) for _event, i, _data in here.messages if i is not None]
    assert ids == list(range(1, len(ids) + 1))
    end: dict[str, Any] = httpx.Response(200, content=here.messages[-1][2]).json()
    assert end["status"] == "succeeded"
    assert end["result"] == {"said": 3}
