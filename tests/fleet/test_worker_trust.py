"""Trust (SPEC §17): a party that can publish on the bus cannot make a worker run anything, nor
replay a call; a worker runs only its own definition of a skill. Real worker processes, a real
NATS server, and a mutating skill that appends a line to a file for each run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.fleet.bus import Names
from ongrid_skills.fleet.inventory import definition_hash
from ongrid_skills.fleet.signing import Call, manager_key, new_nonce, sign
from tests.support.fleet import Fleet, Spy, WorkerProcess, host_skill, publish, serving_manager
from tests.support.server import Server
from tests.support.skills import load
from tests.support.waiting import wait_for

REFUSED = "refused call"


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return tmp_path / "runs.log"


@pytest.fixture
def skills(tmp_path: Path, ledger_file: Path) -> Path:
    root = tmp_path / "worker-skills"
    body = f"echo \"ran $ARGS\" >> {ledger_file}\necho '{{}}'"
    host_skill(root, "append_line", body, **{"class": "mutating"})
    return root


@pytest.fixture
def alpha(fleet: Fleet, skills: Path) -> WorkerProcess:
    return fleet.worker("alpha", skills)


@pytest.fixture
def manager(fleet: Fleet, skills_root: Path, alpha: WorkerProcess) -> Iterator[Server]:
    with serving_manager(fleet, skills_root, "append_line") as server:
        yield server


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def a_call(fleet: Fleet, alpha: WorkerProcess, **fields: Any) -> Call:
    """A call as a manager would sign it, for the skill alpha announces."""
    hosts = alpha.text()
    assert "append_line" in hosts
    now = time.time()
    base: dict[str, Any] = {
        "kind": "call",
        "id": new_nonce(),
        "host": "alpha",
        "skill": "append_line",
        "definition_hash": "0" * 64,
        "skill_class": "mutating",
        "signatures": 1,
        "args": {"forged": True},
        "nonce": new_nonce(),
        "issued_at": now,
        "expires_at": now + 30,
        "reply": Names(fleet.prefix).reply_prefix("nobody"),
    }
    base.update(fields)
    return Call(**base)


def refusals(worker: WorkerProcess, count: int) -> str:
    return worker.wait_line(REFUSED, count=count)


def subject(fleet: Fleet) -> str:
    return Names(fleet.prefix).call_subject("alpha")


def test_an_unsigned_call_published_on_the_bus_is_refused(
    fleet: Fleet, alpha: WorkerProcess, ledger_file: Path
) -> None:
    call = a_call(fleet, alpha)
    publish(fleet.nats.url, subject(fleet), call.encode())
    text = refusals(alpha, 1)
    assert "(unsigned or forged)" in text and "unsigned: the message carries no signature" in text
    assert lines(ledger_file) == []


def test_a_call_signed_by_an_untrusted_key_is_refused(
    fleet: Fleet, alpha: WorkerProcess, ledger_file: Path, tmp_path: Path
) -> None:
    from ongrid_skills.settings import Settings

    intruder = manager_key(Settings(data_dir=str(tmp_path / "intruder")))
    body, headers = sign(intruder, a_call(fleet, alpha))
    publish(fleet.nats.url, subject(fleet), body, headers)
    assert "untrusted_key" in refusals(alpha, 1)
    assert lines(ledger_file) == []


def test_an_expired_signed_call_is_refused(
    fleet: Fleet, alpha: WorkerProcess, ledger_file: Path
) -> None:
    past = time.time() - 120
    call = a_call(fleet, alpha, issued_at=past, expires_at=past + 15)
    body, headers = sign(manager_key(fleet.settings), call)
    publish(fleet.nats.url, subject(fleet), body, headers)
    assert "expired" in refusals(alpha, 1)
    assert lines(ledger_file) == []


def test_a_signed_call_for_another_host_is_refused(
    fleet: Fleet, alpha: WorkerProcess, ledger_file: Path
) -> None:
    body, headers = sign(manager_key(fleet.settings), a_call(fleet, alpha, host="beta"))
    publish(fleet.nats.url, subject(fleet), body, headers)
    assert "wrong_host" in refusals(alpha, 1)
    assert lines(ledger_file) == []


def test_a_replayed_signed_call_is_refused(
    fleet: Fleet, alpha: WorkerProcess, manager: Server, ledger_file: Path
) -> None:
    spy = Spy(fleet.nats.url, subject(fleet))
    try:
        done = manager.call(
            "POST", "/v1/skills/append_line/execute", "olga",
            json={"args": {"host": "alpha", "n": 1}, "confirm": True},
        ).json()  # fmt: skip
        assert done["status"] == "succeeded", done
        wait_for(lambda: spy.messages, "the spy to see the signed call")
    finally:
        spy.close()
    assert lines(ledger_file) == ['ran {"n":1}']
    body, headers = spy.messages[0]
    # The exact bytes and signature, republished (without the message id JetStream would use
    # to drop a duplicate: a replayer controls the headers).
    headers.pop("Nats-Msg-Id", None)
    publish(fleet.nats.url, subject(fleet), body, headers)
    text = refusals(alpha, 1)
    assert f"refused call {done['id']}" in text and "replayed" in text
    assert lines(ledger_file) == ['ran {"n":1}']
    # A fresh message id, the same call: refused as well, the run happened once.
    publish(fleet.nats.url, subject(fleet), body, {**headers, "Nats-Msg-Id": "another"})
    refusals(alpha, 2)
    assert lines(ledger_file) == ['ran {"n":1}']


def test_a_skill_changed_on_the_host_since_it_was_announced_is_not_run(
    fleet: Fleet, alpha: WorkerProcess, manager: Server, skills: Path, ledger_file: Path
) -> None:
    entry = skills / "append-line" / "run"
    entry.write_text(entry.read_text().replace("ran ", "RAN "))  # edited in place, not reloaded
    done = manager.call(
        "POST", "/v1/skills/append_line/execute", "olga",
        json={"args": {"host": "alpha"}, "confirm": True},
    ).json()  # fmt: skip
    assert done["status"] == "failed", done
    assert done["error"]["code"] == "definition_changed"
    assert "not the definition the manager sent" in done["error"]["message"]
    assert lines(ledger_file) == []


@pytest.mark.parametrize(
    ("skill_class", "signatures"), [("safe", 0), ("mutating", 0), ("dangerous", 2)]
)
def test_a_signed_call_sending_the_skill_as_another_class_or_signature_count_is_not_run(
    fleet: Fleet, alpha: WorkerProcess, skills: Path, ledger_file: Path,
    skill_class: str, signatures: int,
) -> None:  # fmt: skip
    # A manager misled some other way (the right hash, the class it was told): the worker
    # compares with its own skill (mutating: one signature) and runs nothing.
    registry, _ = load(external=[skills])
    real_hash = definition_hash(registry.get("append_line"))
    reply = Names(fleet.prefix).reply_prefix("misled")
    spy = Spy(fleet.nats.url, f"{reply}.>")
    try:
        call = a_call(
            fleet, alpha, definition_hash=real_hash, skill_class=skill_class,
            signatures=signatures, reply=reply,
        )  # fmt: skip
        body, headers = sign(manager_key(fleet.settings), call)
        publish(fleet.nats.url, subject(fleet), body, headers)

        def outcome() -> dict[str, Any] | None:
            for data, _ in spy.messages:
                message = json.loads(data)
                if message["type"] == "outcome":
                    found: dict[str, Any] = message["data"]
                    return found
            return None

        done = wait_for(outcome, "the worker's outcome of the call")
    finally:
        spy.close()
    assert done["status"] == "failed"
    assert done["error"]["code"] == "definition_changed"
    assert "is mutating and needs 1 signature(s)" in done["error"]["message"]
    assert lines(ledger_file) == []


def test_a_call_to_an_offline_host_fails_host_offline_at_once(
    fleet: Fleet, alpha: WorkerProcess, manager: Server, ledger_file: Path
) -> None:
    alpha.stop()
    wait_for(
        lambda: not manager.call("GET", "/v1/hosts", "vera").json()["items"][0]["online"],
        "alpha to be offline",
    )
    for host in ("alpha", "never-seen"):
        started = time.monotonic()
        response = manager.call(
            "POST", "/v1/skills/append_line/execute", "olga",
            json={"args": {"host": host}, "confirm": True},
        )  # fmt: skip
        assert time.monotonic() - started < 5  # never a hang
        done = response.json()
        assert response.status_code == 200 and done["status"] == "failed", response.text
        assert done["error"]["code"] == "host_offline"
        assert host in done["error"]["message"]
    assert lines(ledger_file) == []
    events = manager.call("GET", f"/v1/executions/{done['id']}/events?follow=false", "vera")
    assert "dispatched" not in events.text  # nothing was sent
    audit = manager.call("GET", "/v1/audit", params={"action": "execution.failed"}).json()
    assert len(audit["items"]) == 2
    assert all("is offline" in json.dumps(e) or "no online host" in json.dumps(e)
               for e in audit["items"])  # fmt: skip
