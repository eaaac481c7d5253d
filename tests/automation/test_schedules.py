"""Schedules with real time: a real ``serve`` (one for the module) whose ticker fires a schedule
every second, a daily schedule whose last firing was missed while nothing ran, pause,
resume and run now; and two replicas on PostgreSQL firing each firing once."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.support.replicas import ReplicaSet
from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_skill
from tests.support.waiting import wait_for

ECHO = "#!/bin/sh\ncat\n"
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "additionalProperties": False,
}


def _skills(root: Path) -> None:
    write_skill(root, "report", ECHO, schema=SCHEMA, **{"class": "safe"})
    write_skill(root, "cleanup", ECHO, schema=SCHEMA, **{"class": "mutating"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = serve_for_cli(tmp_path_factory.mktemp("schedules"), _skills)
    try:
        yield served
    finally:
        stop(served.process)


def put(served: Served, name: str, **doc: Any) -> dict[str, Any]:
    answer = served.http("PUT", f"/v1/schedules/{name}", json={"skill": "report", **doc})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def firings(served: Served, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = served.http("GET", f"/v1/schedules/{name}", "olga").json()[
        "recent"
    ]
    return items


def test_a_schedule_every_second_fires_on_time_as_its_own_principal(served: Served) -> None:
    body = put(served, "every1", cron="* * * * * *", args={"path": "/var"})
    assert body["next_fire_at"] > time.time() - 1
    # A firing is claimed ("pending") just before its call starts: two that have started.
    done = wait_for(
        lambda: (
            (f := [x for x in firings(served, "every1") if x["kind"] != "pending"])
            and len(f) >= 2
            and f
        ),
        "two started firings of the schedule",
        timeout=10,
    )
    assert all(f["how"] == "on_time" and f["kind"] == "call" for f in done), done
    times = sorted(f["fire_time"] for f in done)
    assert all(t == int(t) for t in times) and times[-1] - times[-2] >= 1, times
    execution = served.final(done[0]["target_id"])
    assert execution["status"] == "succeeded" and execution["requested_by"] == "schedule:every1"
    assert execution["args"] == {"path": "/var"}
    audit = served.http("GET", "/v1/audit", params={"actor": "schedule:every1"}).json()["items"]
    assert {e["action"] for e in audit} >= {"schedule.fired"}

    paused = served.http("POST", "/v1/schedules/every1/pause").json()
    assert paused["paused"] is True and paused["next_fire_at"] is None
    paused_at = time.time()
    manual = served.http("POST", "/v1/schedules/every1/run").json()
    assert manual["kind"] == "call"
    assert served.final(manual["target_id"])["requested_by"] == "schedule:every1"
    resumed = served.http("POST", "/v1/schedules/every1/resume").json()
    resumed_at = time.time()
    assert resumed["paused"] is False
    after = wait_for(
        lambda: [f for f in firings(served, "every1") if f["fire_time"] >= resumed_at] or None,
        "a firing after resuming",
        timeout=10,
    )
    assert after[0]["how"] == "on_time"
    hows = {f["how"] for f in firings(served, "every1") if paused_at <= f["fire_time"] < resumed_at}
    assert hows <= {"manual"}  # nothing on its own while paused
    served.http("DELETE", "/v1/schedules/every1")


@pytest.mark.parametrize(("policy", "kind"), [("run_once", "call"), ("skip", "skipped")])
def test_a_firing_missed_while_nothing_ran_runs_once_or_is_skipped_per_the_policy(
    served: Served, policy: str, kind: str
) -> None:
    two_hours_ago = datetime.now(UTC) - timedelta(hours=2)
    name = f"daily-{policy.replace('_', '-')}"
    cron = f"{two_hours_ago.minute} {two_hours_ago.hour} * * *"
    put(served, name, cron=cron, timezone="UTC", missed=policy)
    # As if the manager had been down since yesterday: the last firing it saw was a day ago.
    with sqlite3.connect(served.process.data_dir / "ongrid.db") as db:
        db.execute("UPDATE schedules SET base = ? WHERE name = ?", (time.time() - 90_000, name))
    done = wait_for(
        lambda: [f for f in firings(served, name) if f["kind"] != "pending"] or None,
        "the missed firing, started or skipped",
        timeout=10,
    )
    assert [(f["how"], f["kind"]) for f in done] == [("missed", kind)], done
    assert (
        abs(done[0]["fire_time"] - two_hours_ago.replace(second=0, microsecond=0).timestamp()) < 1
    )


def test_a_schedule_runs_safe_skills_only_and_admins_change_it(served: Served) -> None:
    refused = served.http(
        "PUT", "/v1/schedules/bad", json={"skill": "cleanup", "cron": "* * * * *"}
    )
    assert refused.status_code == 400 and "safe" in refused.text
    for doc in (
        {"skill": "report", "cron": "61 * * * *"},
        {"skill": "report", "cron": "* * * * *", "timezone": "Mars/Olympus"},
        {"skill": "report", "cron": "* * * * *", "missed": "always"},
        {"skill": "report", "cron": "* * * * *", "typo": True},
        {"skill": "report", "cron": "* * * * *", "args": {"path": 7}},
    ):
        assert served.http("PUT", "/v1/schedules/bad", json=doc).status_code == 400, doc
    doc = {"skill": "report", "cron": "0 7 * * *", "timezone": "Europe/Paris"}
    assert served.http("PUT", "/v1/schedules/morning", "olga", json=doc).status_code == 403
    assert served.http("POST", "/v1/schedules/morning/run", "olga").status_code == 403
    assert served.http("GET", "/v1/schedules", "vera").status_code == 403
    body = served.http("PUT", "/v1/schedules/morning", json=doc).json()
    local = datetime.fromtimestamp(body["next_fire_at"], ZONE)
    assert (local.hour, local.minute) == (7, 0)


ZONE = __import__("zoneinfo").ZoneInfo("Europe/Paris")


def test_two_replicas_on_postgresql_run_each_firing_once_and_start_one_alert_once(
    replicas: ReplicaSet,
) -> None:
    _skills(replicas.skills)
    a, b = replicas.start_all("a", "b")
    answer = a.call("PUT", "/v1/schedules/tick", json={"skill": "report", "cron": "* * * * * *"})
    assert answer.status_code == 201, answer.text

    def enough() -> list[Any] | None:
        items = b.call("GET", "/v1/schedules/tick").json()["recent"]
        return items if len(items) >= 4 else None

    wait_for(enough, "four firings", timeout=15)
    a.call("POST", "/v1/schedules/tick/pause")
    with replicas.store() as store, store.read() as conn:
        times = conn.execute(text("SELECT fire_time FROM schedule_firings")).scalars().all()
        started = conn.execute(
            text("SELECT count(*) FROM executions WHERE requested_by = 'schedule:tick'")
        ).scalar()
        claimed_by = conn.execute(
            text("SELECT count(DISTINCT replica_id) FROM schedule_firings")
        ).scalar()
    assert len(times) == len(set(times)) >= 4
    assert started == len(times)
    assert claimed_by >= 1

    rule = {"name": "r", "skill": "report", "args": {"path": "{labels.instance}"}}
    token = a.call("PUT", "/v1/triggers/am", json={"rules": [rule]}).json()["token"]
    payload = {"labels": {"alertname": "DiskFull", "instance": "web-1"}, "fingerprint": "f1"}

    def deliver(replica: Any) -> Any:
        return httpx.post(
            f"{replica.serve.url}/v1/triggers/am",
            json=payload,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        ).json()

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(deliver, [a, b, a, b]))
    assert sum(len(x["started"]) for x in answers) == 1, answers
    assert sum(x["duplicates"] for x in answers) == 3
