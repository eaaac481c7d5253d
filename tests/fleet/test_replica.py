"""Replica leases, for real: `serve` processes on one PostgreSQL database, one killed with -9.

Only the calls of a replica whose lease expired become interrupted (by a surviving replica, once),
a replica starting never touches the calls of the others, the audit chain stays one valid chain
while both replicas write at once, and a waiting agent run of a dead replica resumes on exactly
one of the survivors. The leases last :data:`tests.support.replicas.LEASE_TTL` seconds here.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

from ongrid_skills.agent.runs import RunStore
from tests.support.agent import llm_env
from tests.support.llm import FakeLLM, Reply, call
from tests.support.processes import read_pid
from tests.support.replicas import LEASE_TTL, Replica, ReplicaSet
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import wait_for
from tests.test_runtime import HOLD, released

ECHO = "#!/bin/sh\ncat\n"


def start_held(replica: Replica, skill: str, folder: Path) -> str:
    """Start a HOLD skill on ``replica`` without waiting; return its execution id once the
    skill's process runs."""
    started = replica.call("POST", f"/v1/skills/{skill}/execute", "olga", json={"wait": False})
    assert started.status_code == 202, started.text
    wait_for(lambda: read_pid(folder / "main.pid"), f"{skill} to start")
    execution_id: str = started.json()["id"]
    return execution_id


def test_a_replica_killed_mid_call_has_only_its_calls_interrupted_once_its_lease_expires(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    folder_a = make_skill("hold_a", HOLD)
    folder_b = make_skill("hold_b", HOLD)
    a, b = replicas.start_all("a", "b")
    with released(folder_a), released(folder_b):
        on_a = start_held(a, "hold_a", folder_a)
        on_b = start_held(b, "hold_b", folder_b)
        killed_pid = a.serve.proc.pid
        a.kill()

        ended = wait_for(
            lambda: (body := b.execution(on_a))["status"] == "interrupted" and body,
            "the dead replica's call to be interrupted",
            timeout=LEASE_TTL * 5,
        )
        assert ended["error"]["code"] == "interrupted"
        assert "lease expired" in ended["error"]["message"]
        assert b.execution(on_b)["status"] == "running"
        with replicas.store() as store:
            (expired,) = store.audit.entries(action="replica.lease_expired")
            interrupted = store.audit.entries(action="execution.interrupted")
            leases = store.leases.all()
        assert expired["data"]["pid"] == killed_pid
        assert expired["data"]["interrupted"] == [on_a]
        assert [e["subject"] for e in interrupted] == [on_a]
        assert [lease.pid for lease in leases] == [b.serve.proc.pid]

        # A replica starting (the dead one's host coming back) leaves b's call alone, at its
        # start-up and at its heartbeats.
        again = replicas.start("a-again")
        with replicas.store() as store:
            first = {lease.pid: lease.renewed_at for lease in store.leases.all()}

            def renewed() -> bool:
                now = {lease.pid: lease.renewed_at for lease in store.leases.all()}
                return now[again.serve.proc.pid] > first[again.serve.proc.pid]

            wait_for(renewed, "the restarted replica's heartbeat", timeout=LEASE_TTL * 3)
        assert again.execution(on_b)["status"] == "running"

        (folder_b / "release").touch()
        assert again.final(on_b)["status"] == "succeeded"
    with replicas.store() as store:
        assert [e["subject"] for e in store.audit.entries(action="execution.interrupted")] == [on_a]
        assert store.audit.verify().ok


def test_both_replicas_writing_at_once_keep_one_valid_audit_chain(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    make_skill("peek", ECHO)
    a, b = replicas.start_all("a", "b")
    barrier = threading.Barrier(4)
    failures: list[str] = []

    def burst(replica: Replica, who: str) -> None:
        barrier.wait()
        for n in range(15):
            answer = replica.call("POST", "/v1/skills/peek/execute", who, json={"args": {"n": n}})
            if answer.status_code != 200:
                failures.append(answer.text)

    threads = [
        threading.Thread(target=burst, args=(replica, who))
        for replica in (a, b)
        for who in ("olga", "oscar")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []

    for replica in (a, b):
        verified: dict[str, Any] = replica.call("GET", "/v1/audit/verify").json()
        assert verified["ok"], verified
        assert verified["problems"] == []
    with replicas.store() as store:
        verification = store.audit.verify()
        finished = store.audit.entries(action="execution.finished", limit=1000)
    assert verification.ok, verification.to_dict()
    assert len(finished) == 60
    # the 5 tokens made before, then execution.started and execution.finished of each call
    assert verification.entries == 5 + 120


def test_a_waiting_agent_run_of_a_dead_replica_resumes_on_exactly_one_other(
    replicas: ReplicaSet, make_skill: MakeSkill, fake: FakeLLM, tmp_path: Path
) -> None:
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    replicas.env.update(llm_env(fake, ONGRID_PERSONAS_DIRS=str(tmp_path / "personas")))
    fake.add(Reply(calls=[call("set_flag", {"flag": "on"})]))
    a = replicas.start("a")
    body = {"persona": "fixer", "message": "turn the flag on"}
    run_id = a.call("POST", "/v1/agent/runs", "olga", json=body).json()["id"]

    def run_on(replica: Replica) -> dict[str, Any]:
        found: dict[str, Any] = replica.call("GET", f"/v1/agent/runs/{run_id}", "olga").json()
        return found

    wait_for(lambda: run_on(a)["status"] == "waiting_approval", "the run to wait")
    b, c = replicas.start_all("b", "c")
    a.kill()
    survivors = live_leases(replicas, b, c)

    def adopted() -> bool:
        with replicas.store() as store:
            record = RunStore(store).get(run_id)
        return record is not None and record.replica_id in survivors

    wait_for(adopted, "a survivor to adopt the run", timeout=LEASE_TTL * 5)
    fake.add(Reply("The flag is on."))
    (approval,) = b.call("GET", "/v1/approvals?status=pending", "oscar").json()["items"]
    signed = c.call("POST", f"/v1/approvals/{approval['id']}/approve", "oscar")
    assert signed.status_code == 200, signed.text
    final = wait_for(lambda: (r := run_on(b))["status"] == "done" and r, "the resumed run")
    assert final["final_answer"] == "The flag is on."
    assert len(fake.requests) == 2  # one resumed run asked the model again, not two
    resumed = [m for m in events_of(b, run_id) if "resumed after a manager restart" in m]
    assert len(resumed) == 1


def live_leases(replicas: ReplicaSet, *alive: Replica) -> set[str]:
    pids = {r.serve.proc.pid for r in alive}
    with replicas.store() as store:
        return {lease.id for lease in store.leases.all() if lease.pid in pids}


def events_of(replica: Replica, run_id: str) -> list[str]:
    """The data lines of a run's SSE timeline (replayed whole: the run has ended)."""
    headers = {"Authorization": f"Bearer {replica.tokens['olga']}"}
    url = f"{replica.serve.url}/v1/agent/runs/{run_id}/events"
    with httpx.stream("GET", url, headers=headers, timeout=10) as response:
        return [line for line in response.iter_lines() if line.startswith("data:")]
