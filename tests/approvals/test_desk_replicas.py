"""Approvals across replicas: real `serve` processes on one PostgreSQL database.

An approval requested on one replica is seen and signed on another; the approved call runs once,
on the replica that saw the last signature, however the signatures race.
"""

from __future__ import annotations

import threading

import httpx

from tests.support.replicas import Replica, ReplicaSet
from tests.support.skills import MakeSkill

# Records each call it receives in calls.log (one line: its args) and echoes them.
RECORDING_ECHO = """#!/bin/sh
input=$(cat)
printf '%s\\n' "$input" >> calls.log
printf '%s\\n' "$input"
"""


def lease_of(replicas: ReplicaSet, replica: Replica) -> str:
    """The lease id of a running replica (its row in the replicas table names its pid)."""
    with replicas.store() as store:
        leases = [lease.id for lease in store.leases.all() if lease.pid == replica.serve.proc.pid]
    assert len(leases) == 1, leases
    return leases[0]


def test_an_approval_requested_on_one_replica_is_signed_on_another_and_runs_there(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    folder = make_skill("restart_service", RECORDING_ECHO, **{"class": "mutating"})
    a, b = replicas.start_all("a", "b")

    asked = a.call("POST", "/v1/skills/restart_service/execute", "olga", json={"args": {"n": 1}})
    assert asked.status_code == 202, asked.text
    pending = asked.json()
    inbox = b.call("GET", "/v1/approvals?status=pending", "oscar").json()["items"]
    assert [item["id"] for item in inbox] == [pending["approval_id"]]

    signed = b.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "oscar")
    assert signed.status_code == 200, signed.text
    assert signed.json()["status"] == "approved"

    done = a.final(pending["id"])
    assert done["status"] == "succeeded"
    assert done["result"] == {"n": 1}
    assert (folder / "calls.log").read_text().splitlines() == ['{"n":1}']
    with replicas.store() as store:
        assert store.executions.replica_of(pending["id"]) == lease_of(replicas, b)
        assert store.audit.verify().ok


def race(approval: str, signers: list[tuple[Replica, str]]) -> dict[str, httpx.Response]:
    """Each (replica, signer) approves at the same moment; their answers by signer."""
    barrier = threading.Barrier(len(signers))
    answers: dict[str, httpx.Response] = {}

    def sign(replica: Replica, who: str) -> None:
        barrier.wait()
        answers[who] = replica.call("POST", f"/v1/approvals/{approval}/approve", who)

    threads = [threading.Thread(target=sign, args=signer) for signer in signers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def test_two_replicas_racing_on_the_last_signature_run_the_call_once(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    """Oscar signs on one replica and admin on the other at the same moment, again and again:
    each time exactly one signature approves, and the call runs once."""
    folder = make_skill("restart_service", RECORDING_ECHO, **{"class": "mutating"})
    a, b = replicas.start_all("a", "b")
    rounds = 25
    for n in range(rounds):
        args = {"args": {"n": n}}
        asked = a.call("POST", "/v1/skills/restart_service/execute", "olga", json=args)
        assert asked.status_code == 202, asked.text
        answers = race(asked.json()["approval_id"], [(a, "oscar"), (b, "admin")])
        codes = sorted(r.status_code for r in answers.values())
        assert codes == [200, 409], {who: r.text for who, r in answers.items()}
        assert b.final(asked.json()["id"])["status"] == "succeeded"

    lines = (folder / "calls.log").read_text().splitlines()
    assert sorted(lines) == sorted(f'{{"n":{n}}}' for n in range(rounds))
    with replicas.store() as store:
        verification = store.audit.verify()
        assert verification.ok, verification.to_dict()
        started = store.audit.entries(action="execution.started", limit=1000)
        signed = store.audit.entries(action="approval.signed", limit=1000)
        approved = store.audit.entries(action="approval.approved", limit=1000)
    assert len(started) == len(approved) == len(signed) == rounds
