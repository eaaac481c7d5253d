"""A burst of 200 execute calls against a real `serve` with 1 slot and a queue of 2.

The skill blocks until a gate file appears. The gate is opened only once every request has been
decided (answered 429, or admitted: its execution row exists), so the burst is measured against a
full house. Then every admitted call must finish, each with exactly one row, and the 429s none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.server import ServeProcess, start_serve, stop
from tests.support.skills import write_skill
from tests.support.waiting import until

REQUESTS = 200
SLOTS = 1
QUEUE = 2


@dataclass
class Burst:
    process: ServeProcess
    token: str
    responses: list[httpx.Response]
    rows: list[dict[str, Any]]
    admitted_before_gate: int

    @property
    def admitted(self) -> list[httpx.Response]:
        return [r for r in self.responses if r.status_code != 429]

    @property
    def refused(self) -> list[httpx.Response]:
        return [r for r in self.responses if r.status_code == 429]

    def get(self, path: str, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.get(f"{self.process.url}{path}", headers=headers, params=params, timeout=20)


async def fire(url: str, token: str, gate: Path) -> tuple[list[httpx.Response], int]:
    """Fire the burst; open the gate once every request is decided; return all answers."""
    limits = httpx.Limits(max_connections=REQUESTS + 20, max_keepalive_connections=REQUESTS + 20)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=60
    ) as client:
        calls = [
            asyncio.create_task(client.post("/v1/skills/blocker/execute", json={"args": {"i": i}}))
            for i in range(REQUESTS)
        ]

        async def decided() -> tuple[int] | None:
            """(rows,) once every request is either refused or has its row."""
            refused = sum(1 for c in calls if c.done() and c.result().status_code == 429)
            listed = await client.get("/v1/executions", params={"limit": 500})
            rows = len(listed.json()["items"])
            return (rows,) if refused + rows >= REQUESTS else None

        (rows,) = await until(decided, "the burst to be fully decided", timeout=40)
        gate.touch()
        return list(await asyncio.gather(*calls)), rows


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Burst]:
    base = tmp_path_factory.mktemp("burst")
    skills = base / "skills"
    skills.mkdir()
    gate = base / "gate"
    write_skill(
        skills,
        "blocker",
        f"#!/bin/sh\ncat >/dev/null\nwhile [ ! -e '{gate}' ]; do sleep 0.01; done\n"
        "echo '{\"ok\": true}'\n",
    )
    data = base / "data"
    store = open_store(str(data), None)
    token = store.tokens.create("olga", Role.OPERATOR)[0]
    store.close()
    env = {
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_MAX_CONCURRENT_EXECUTIONS": str(SLOTS),
        "ONGRID_EXECUTION_QUEUE_SIZE": str(QUEUE),
    }
    process = start_serve(data, env)
    try:
        responses, admitted = asyncio.run(fire(process.url, token, gate))
        headers = {"Authorization": f"Bearer {token}"}
        listed = httpx.get(
            f"{process.url}/v1/executions", params={"limit": 500}, headers=headers, timeout=20
        )
        yield Burst(process, token, responses, listed.json()["items"], admitted)
    finally:
        stop(process)


def test_most_of_a_burst_is_refused_with_429_busy(burst: Burst) -> None:
    assert len(burst.responses) == REQUESTS
    assert len(burst.refused) >= REQUESTS // 2
    assert burst.admitted
    for response in burst.refused:
        assert response.json() == {
            "error": {
                "code": "busy",
                "message": "too many executions running and waiting; retry later",
                "details": [],
            }
        }


def test_every_admitted_call_finishes_once_the_gate_opens(burst: Burst) -> None:
    for response in burst.admitted:
        assert response.status_code == 200, response.text[:300]
        body = response.json()
        assert body["status"] == "succeeded"
        assert body["result"] == {"ok": True}


def test_every_admitted_call_has_exactly_one_final_row_and_the_429s_none(burst: Burst) -> None:
    ids = [r.json()["id"] for r in burst.admitted]
    assert len(set(ids)) == len(ids)
    assert sorted(row["id"] for row in burst.rows) == sorted(ids)
    assert len(burst.rows) == burst.admitted_before_gate
    for row in burst.rows:
        assert row["status"] == "succeeded", row
        assert row["finished_at"] is not None
    args_seen = sorted(row["args"]["i"] for row in burst.rows)
    assert len(set(args_seen)) == len(args_seen)


def test_after_a_burst_the_server_is_idle_healthy_and_its_audit_intact(burst: Burst) -> None:
    health = httpx.get(f"{burst.process.url}/v1/health", timeout=10).json()
    assert (health["status"], health["running"], health["queued"]) == ("ok", 0, 0)
    verify = burst.get("/v1/audit/verify").json()
    assert verify["ok"] is True, verify
    started = burst.get("/v1/audit", action="execution.started", limit=1000).json()["items"]
    finished = burst.get("/v1/audit", action="execution.finished", limit=1000).json()["items"]
    assert len(started) == len(finished) == len(burst.admitted)
    metrics = burst.get("/metrics").text
    assert f"ongrid_executions_rejected_busy_total {float(len(burst.refused))}" in metrics


def test_after_a_burst_a_new_call_is_admitted_again(burst: Burst) -> None:
    headers = {"Authorization": f"Bearer {burst.token}"}
    response = httpx.post(
        f"{burst.process.url}/v1/skills/blocker/execute",
        json={"args": {"i": -1}},
        headers=headers,
        timeout=20,
    )
    assert response.status_code == 200
    assert response.json()["status"] == "succeeded"


def test_no_more_calls_are_admitted_than_slots_plus_queue(burst: Burst) -> None:
    assert len(burst.admitted) <= SLOTS + QUEUE
