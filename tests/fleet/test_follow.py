"""The timeline of a call followed from any replica: the same numbered events, in order.

Two `serve` replicas on one PostgreSQL database; the call runs on one, and a client of each
follows its SSE timeline from while it runs to its end (replayed events, then live ones). The
other replica learns of new events by LISTEN/NOTIFY, not by reading the store on a timer: with
a long event flush, a line still reaches it at once; with its listener cut, it polls.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

from ongrid_skills.fleet.notices import LISTENER_NAME
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

    @classmethod
    def replay(cls, replica: Replica, execution_id: str) -> list[Message]:
        """The messages of a finished call's stream."""
        follower = cls(replica, execution_id)
        follower.run()
        return follower.messages

    def saw(self, text: str) -> bool:
        return any(text in data for _event, _id, data in list(self.messages))


def test_a_call_running_on_one_replica_is_followed_from_the_other_with_the_same_events(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    folder = make_skill("talk", TALK)
    a, b = replicas.start_all("a", "b")
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


def listeners(url: str, *, terminate: bool = False) -> int:
    """How many replicas of this database listen for notices (ending them with ``terminate``)."""
    target = make_url(url)
    query = (
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        if terminate
        else "SELECT pid FROM pg_stat_activity"
    )
    query += " WHERE datname = %s AND application_name = %s"
    with psycopg.connect(target.set(drivername="postgresql").render_as_string(False)) as conn:
        return len(conn.execute(query, (target.database, LISTENER_NAME)).fetchall())


def forge(url: str, execution_id: str) -> None:
    """Send, as a role that may connect to the database, a live notice of a line never printed."""
    body = json.dumps({"id": execution_id, "events": [[3, time.time(), "stderr", FORGED]]})
    target = make_url(url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('ongrid_live', %s)", ("0" * 32 + " " + body,))


FORGED = {"line": "forged by whoever may connect"}


def test_a_line_reaches_a_client_of_the_other_replica_long_before_the_flush_and_a_forged_never(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    folder = make_skill("talk", TALK)
    # Events reach the store 5 s after the first of each batch: reading the store cannot help.
    a, b = replicas.start_all("a", "b", ONGRID_EVENT_FLUSH_MS="5000")
    wait_for(lambda: listeners(replicas.url) == 2, "both replicas to listen for notices")
    started = a.call("POST", "/v1/skills/talk/execute", "olga", json={"wait": False})
    execution_id = started.json()["id"]
    there = Follower(b, execution_id)
    try:
        there.start()
        wait_for(lambda: there.saw('"one"'), "the other replica to stream the first line", 3)
        forge(replicas.url, execution_id)
        (folder / "go").touch()
        went = time.monotonic()
        wait_for(lambda: there.saw('"three"'), "the next lines on the other replica", 2)
        assert time.monotonic() - went < 2
    finally:
        (folder / "go").touch()
    there.join(timeout=30)
    assert [event for event, _id, _data in there.messages][-2:] == ["status", "end"]
    assert not there.saw("forged")


def test_a_replica_whose_listener_is_cut_polls_and_listens_again(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    folder = make_skill("talk", TALK)
    a, b = replicas.start_all("a", "b")
    wait_for(lambda: listeners(replicas.url) == 2, "both replicas to listen for notices")
    started = a.call("POST", "/v1/skills/talk/execute", "olga", json={"wait": False})
    execution_id = started.json()["id"]
    there = Follower(b, execution_id)
    try:
        there.start()
        wait_for(lambda: there.saw('"one"'), "the other replica to stream the first line")
        assert listeners(replicas.url, terminate=True) == 2
        (folder / "go").touch()
        # The store is read again (every 100 ms, then on the commit notices once back).
        wait_for(lambda: there.saw('"succeeded"'), "the call's end on the other replica", 4)
    finally:
        (folder / "go").touch()
    there.join(timeout=30)
    assert [data for _event, _id, data in there.messages if '"stderr"' in data] == [
        data for _event, _id, data in Follower.replay(a, execution_id) if '"stderr"' in data
    ]
    wait_for(lambda: listeners(replicas.url) == 2, "both replicas to listen again", 10)


def test_a_call_followed_while_it_awaits_approval_streams_live_once_another_replica_runs_it(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    folder = make_skill("talk", TALK, **{"class": "mutating"})
    a, b = replicas.start_all("a", "b", ONGRID_EVENT_FLUSH_MS="5000")
    wait_for(lambda: listeners(replicas.url) == 2, "both replicas to listen for notices")
    asked = a.call("POST", "/v1/skills/talk/execute", "olga", json={"args": {}})
    assert asked.status_code == 202, asked.text
    pending = asked.json()
    here = Follower(a, pending["id"])  # on the replica it was asked on: nothing runs there yet
    try:
        here.start()
        wait_for(lambda: here.saw("approval_pending"), "the follower to read the waiting call")
        signed = b.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "oscar")
        assert signed.status_code == 200, signed.text
        wait_for(lambda: here.saw('"one"'), "the first line on the replica that waited", 3)
    finally:
        (folder / "go").touch()
    here.join(timeout=30)
    assert here.saw('"three"') and here.messages[-1][0] == "end"
