"""Previews of requests for host skills (SPEC §20): the worker announces the preview in its
signed inventory, the manager sends it to the request's host as a signed safe call marked as
the preview, and the host runs the preview it declared, never the real call. A real NATS
server, a real worker process, the manager's app on a real store."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.fleet.bus import Names
from ongrid_skills.fleet.inventory import BadEntry, parse_skills, record_of
from ongrid_skills.fleet.signing import Call, manager_key, new_nonce, sign
from tests.support.fleet import Fleet, Spy, WorkerProcess, host_skill, publish
from tests.support.server import running_app
from tests.support.skills import load, write_exec
from tests.support.waiting import wait_for

SCHEMA = {
    "type": "object",
    "properties": {"target": {"type": "string"}, "dry_run": {"type": "boolean"}},
    "required": ["target"],
}


def _body(log: Path) -> str:
    """A dry run (``dry_run: true``) says what it would change; a real call logs its args."""
    return (
        'case $ARGS in\n'
        '  *\'"dry_run":true\'*|*\'"dry_run": true\'*)\n'
        '    printf \'{"would_change": %s}\\n\' "$ARGS" ;;\n'
        f'  *) printf \'%s\\n\' "$ARGS" >> {log}; printf \'{{}}\\n\' ;;\n'
        'esac'
    )  # fmt: skip


@pytest.fixture
def calls_log(tmp_path: Path) -> Path:
    return tmp_path / "calls.log"


@pytest.fixture
def skills(tmp_path: Path, calls_log: Path) -> Path:
    root = tmp_path / "worker-skills"
    body = _body(calls_log)
    host_skill(root, "set_flag", body, schema=SCHEMA, preview={"args": {"dry_run": True}},
               **{"class": "mutating"})  # fmt: skip
    folder = host_skill(root, "drop_table", body, schema=SCHEMA, preview={"entry": "plan.sh"},
                        **{"class": "dangerous"})  # fmt: skip
    write_exec(folder, "plan.sh", '#!/bin/sh\nprintf \'{"would_drop": %s}\\n\' "$(cat)"\n')
    host_skill(root, "no_plan", body, schema=SCHEMA, **{"class": "mutating"})
    return root


def _previewed(server: Any, approval_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        body: dict[str, Any] = server.call("GET", f"/v1/approvals/{approval_id}", "vera").json()
        run = (body.get("preview") or {}).get("run") or {}
        return body if run.get("status") in ("done", "failed") else None

    return wait_for(ended, "the request's preview", 10)


def test_a_remote_mutating_requests_preview_runs_on_its_host_and_is_attached(
    fleet: Fleet, skills_root: Path, skills: Path, calls_log: Path
) -> None:
    with running_app(fleet.manager_settings(skills_root)) as manager:
        fleet.worker("alpha", skills)

        def offered() -> bool:
            found = manager.call("GET", "/v1/skills", "vera").json()["items"]
            return {"set_flag", "drop_table"} <= {s["name"] for s in found}

        wait_for(offered, "the host skills to be offered")
        args = {"host": "alpha", "target": "db-01", "dry_run": False}
        pending = manager.call("POST", "/v1/skills/set_flag/execute", "olga", json={"args": args})
        assert pending.status_code == 202, pending.text
        body = _previewed(manager, pending.json()["approval_id"])
        run = body["preview"]["run"]
        assert run["status"] == "done", run
        # The host merged the preview's args over the caller's (the host arg stays here).
        assert json.loads(run["result"]) == {"would_change": {"target": "db-01", "dry_run": True}}
        assert run["timeout_seconds"] == 10
        assert body["status"] == "pending" and body["args"] == args
        [entry] = manager.store.audit.entries(action="approval.previewed", subject=body["id"])
        assert entry["data"]["status"] == "done"

        plan = {"host": "alpha", "target": "users"}
        dropping = manager.call(
            "POST", "/v1/skills/drop_table/execute", "olga", json={"args": plan}
        )
        assert dropping.status_code == 202, dropping.text
        run = _previewed(manager, dropping.json()["approval_id"])["preview"]["run"]
        assert run["status"] == "done", run
        assert json.loads(run["result"]) == {"would_drop": {"target": "users"}}  # plan.sh ran
        assert not calls_log.exists()  # no preview ran the real entry

        approved = manager.call("POST", f"/v1/approvals/{body['id']}/approve", "oscar")
        assert approved.status_code == 200, approved.text
        assert manager.final(pending.json()["id"])["status"] == "succeeded"
    # The approved call ran once, with the args as signed.
    ran = [json.loads(line) for line in calls_log.read_text().splitlines()]
    assert ran == [{"target": "db-01", "dry_run": False}]


def _outcome(fleet: Fleet, worker: WorkerProcess, skills: Path, **fields: Any) -> dict[str, Any]:
    """What the worker answers to a preview call signed by the manager's key."""
    registry, _ = load(external=[skills])
    record = record_of(registry.get(fields.pop("skill")))
    reply = Names(fleet.prefix).reply_prefix("forger")
    now = time.time()
    call = Call(
        kind="call", id=new_nonce(), host=worker.host, skill=record["name"],
        definition_hash=record["definition_hash"], skill_class="safe", signatures=0,
        args={"target": "db-01"}, nonce=new_nonce(), issued_at=now, expires_at=now + 30,
        reply=reply, preview=True,
    )  # fmt: skip
    call = dataclasses.replace(call, **fields)
    spy = Spy(fleet.nats.url, f"{reply}.>")
    try:
        body, headers = sign(manager_key(fleet.settings), call)
        publish(fleet.nats.url, Names(fleet.prefix).call_subject(worker.host), body, headers)

        def outcome() -> dict[str, Any] | None:
            for data, _ in spy.messages:
                message = json.loads(data)
                if message["type"] == "outcome":
                    found: dict[str, Any] = message["data"]
                    return found
            return None

        return wait_for(outcome, "the worker's outcome of the preview call")
    finally:
        spy.close()


def test_a_forged_preview_call_runs_no_real_call_on_the_worker(
    fleet: Fleet, skills: Path, calls_log: Path
) -> None:
    alpha = fleet.worker("alpha", skills)
    # A skill that declares no preview: refused, whatever the call says.
    refused = _outcome(fleet, alpha, skills, skill="no_plan")
    assert refused["status"] == "failed"
    assert refused["error"]["code"] == "no_preview", refused
    # A preview call sent as its real class (mutating, one signature): not a safe call.
    as_real = _outcome(fleet, alpha, skills, skill="set_flag", skill_class="mutating", signatures=1)
    assert as_real["error"]["code"] == "definition_changed", as_real
    # Args that switch the dry run off: the host's preview args win; the dry run ran.
    merged = _outcome(
        fleet, alpha, skills, skill="set_flag", args={"target": "x", "dry_run": False}
    )
    assert merged["status"] == "succeeded", merged
    assert not calls_log.exists()


def test_the_definition_hash_covers_the_announced_preview(skills: Path) -> None:
    registry, _ = load(external=[skills])
    record = record_of(registry.get("set_flag"))
    assert record["preview"] == {"args": {"dry_run": True}, "timeout_seconds": 10}
    planned = record_of(registry.get("drop_table"))["preview"]
    assert len(planned["entry"]) == 64 and "plan.sh" not in json.dumps(planned)
    assert record_of(registry.get("no_plan"))["preview"] is None  # and left out of its hash
    assert parse_skills([record])[0].preview is not None
    tampered = {**record, "preview": {"args": {"dry_run": False}, "timeout_seconds": 10}}
    with pytest.raises(BadEntry, match="does not cover"):
        parse_skills([tampered])
