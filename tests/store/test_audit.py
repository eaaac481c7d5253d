"""The hash-chained audit log: what lands in it, and that edits and deletions are detected."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.store.audit import entry_hash
from tests.support.processes import CLI
from tests.support.server import Server, make_settings, running_app
from tests.support.skills import MakeSkill

ECHO = "#!/bin/sh\ncat\n"
SCHEMA = {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}
ARGS = {"target": "web-01"}


def execute(server: Server, skill: str, who: str, **body: Any) -> Any:
    return server.call("POST", f"/v1/skills/{skill}/execute", who, json={"args": ARGS, **body})


def requested(server: Server, skill: str, who: str, **body: Any) -> dict[str, Any]:
    response = execute(server, skill, who, **body)
    assert response.status_code == 202, response.text
    out: dict[str, Any] = response.json()
    return out


def audit(server: Server, **params: Any) -> list[dict[str, Any]]:
    response = server.call("GET", "/v1/audit", "vera", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def verify(server: Server) -> dict[str, Any]:
    response = server.call("GET", "/v1/audit/verify", "vera")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def one(entries: list[dict[str, Any]], action: str, subject: str | None) -> dict[str, Any]:
    found = [e for e in entries if e["action"] == action and e["subject"] == subject]
    assert len(found) == 1, (action, subject, [(e["action"], e["subject"]) for e in entries])
    return found[0]


@pytest.fixture
def folders(make_skill: MakeSkill) -> dict[str, Path]:
    return {
        "set_flag": make_skill("set_flag", ECHO, schema=SCHEMA, **{"class": "mutating"}),
        "drop_table": make_skill("drop_table", ECHO, schema=SCHEMA, **{"class": "dangerous"}),
        "peek": make_skill("peek", ECHO, schema=SCHEMA),
    }


@pytest.fixture
def server_skills(folders: dict[str, Path]) -> dict[str, Path]:
    return folders


def test_every_request_signature_decision_run_and_result_is_audited_with_who_and_when(
    server: Server, folders: dict[str, Path]
) -> None:
    before = time.time()
    # approved by another operator, then run
    run = requested(server, "set_flag", "olga")
    server.call("POST", f"/v1/approvals/{run['approval_id']}/approve", "oscar")
    server.final(run["id"])
    # dangerous: the confirming admin requester is the first signer, then a second admin
    danger = requested(server, "drop_table", "admin", confirm=True)
    server.call("POST", f"/v1/approvals/{danger['approval_id']}/approve", "admin2")
    server.final(danger["id"])
    # rejected
    rejected = requested(server, "set_flag", "olga")
    server.call("POST", f"/v1/approvals/{rejected['approval_id']}/reject", "oscar")
    # refused by policy, invalid args, unknown skill
    assert execute(server, "set_flag", "vera").status_code == 403
    bad = server.call("POST", "/v1/skills/peek/execute", "olga", json={"args": {"target": 5}})
    assert bad.status_code == 400
    assert execute(server, "no_such_skill", "olga").status_code == 404
    # void: the skill changed before the signature
    void = requested(server, "set_flag", "olga")
    manifest = json.loads((folders["set_flag"] / "skill.json").read_text())
    (folders["set_flag"] / "skill.json").write_text(json.dumps({**manifest, "timeout_seconds": 5}))
    assert server.call("POST", "/v1/reload", "admin").status_code == 200
    server.call("POST", f"/v1/approvals/{void['approval_id']}/approve", "oscar")
    # expired
    expired = requested(server, "set_flag", "olga")
    server.manager.clock = lambda: time.time() + 7200
    server.call("GET", f"/v1/approvals/{expired['approval_id']}", "vera")

    entries = audit(server)

    assert all(e["ts"] >= before - 1 for e in entries if e["action"] != "token.created")
    a = run["approval_id"]
    asked = one(entries, "approval.requested", a)
    assert asked["actor"] == "olga"
    assert asked["data"]["execution_id"] == run["id"]
    assert asked["data"]["args"] == ARGS
    assert asked["data"]["signatures_required"] == 1
    assert one(entries, "approval.signed", a)["actor"] == "oscar"
    assert one(entries, "approval.approved", a)["data"]["execution_id"] == run["id"]
    started = one(entries, "execution.started", run["id"])
    assert started["data"]["approval_id"] == a
    assert started["data"]["args"] == ARGS
    result = one(entries, "execution.finished", run["id"])
    assert result["data"]["status"] == "succeeded"
    assert result["data"]["exit_code"] == 0

    d = danger["approval_id"]
    signed = [e for e in entries if e["action"] == "approval.signed" and e["subject"] == d]
    assert sorted(e["actor"] for e in signed) == ["admin", "admin2"]
    assert one(entries, "execution.finished", danger["id"])["data"]["status"] == "succeeded"

    r = one(entries, "approval.rejected", rejected["approval_id"])
    assert r["actor"] == "oscar"
    assert r["data"]["execution_id"] == rejected["id"]

    denied = [e for e in entries if e["action"] == "execution.denied"]
    assert [(e["actor"], e["data"]["skill"]) for e in denied] == [("vera", "set_flag")]
    invalid = [e for e in entries if e["action"] == "execution.invalid_args"]
    assert [(e["actor"], e["data"]["skill"]) for e in invalid] == [("olga", "peek")]
    refused = [e for e in entries if e["action"] == "execution.refused"]
    assert [(e["actor"], e["data"]["code"]) for e in refused] == [("olga", "not_found")]

    assert one(entries, "registry.reloaded", None)["data"]["changed"] == ["set_flag"]
    assert one(entries, "approval.void", void["approval_id"])["actor"] == "manager"
    gone = one(entries, "approval.expired", expired["approval_id"])
    assert gone["actor"] == "manager"
    assert gone["data"]["execution_id"] == expired["id"]

    assert [e["seq"] for e in entries] == list(range(len(entries), 0, -1))  # newest first
    assert verify(server) == {
        "ok": True,
        "entries": len(entries),
        "problems": [],
        "first_broken": None,
        "keyed_from": 1,
        "anchor": len(entries),
        "warnings": [],
    }


def test_the_audit_log_can_be_filtered_by_action_and_subject(server: Server) -> None:
    run = requested(server, "set_flag", "olga")
    server.call("POST", f"/v1/approvals/{run['approval_id']}/approve", "oscar")
    server.final(run["id"])

    signed = audit(server, action="approval.signed")
    about = audit(server, subject=run["approval_id"])

    assert [(e["action"], e["actor"]) for e in signed] == [("approval.signed", "oscar")]
    assert [e["action"] for e in about] == [
        "approval.approved",
        "approval.signed",
        "approval.requested",
    ]
    assert server.client.get("/v1/audit").status_code == 401
    assert server.client.get("/v1/audit/verify").status_code == 401


def test_a_cancelled_request_is_audited(server: Server) -> None:
    run = requested(server, "set_flag", "olga")
    server.call("POST", f"/v1/executions/{run['id']}/cancel", "olga")

    entry = one(audit(server), "approval.cancelled", run["approval_id"])
    assert entry["actor"] == "olga"


# ---- tampering ----------------------------------------------------------------------------
def db_path(server: Server) -> Path:
    return Path(server.settings.data_dir) / "ongrid.db"


def tamper(path: Path, sql: str, *params: Any) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            changed = conn.execute(sql, params).rowcount
        assert changed == 1, sql
    finally:
        conn.close()


def some_history(server: Server) -> int:
    run = requested(server, "set_flag", "olga")
    server.call("POST", f"/v1/approvals/{run['approval_id']}/approve", "oscar")
    server.final(run["id"])
    check = verify(server)
    assert check["ok"], check
    count: int = check["entries"]
    return count


def test_editing_one_entry_is_detected(server: Server) -> None:
    some_history(server)
    tamper(
        db_path(server),
        "UPDATE audit_entries SET data = ? WHERE seq = 3",
        json.dumps({"name": "olga", "role": "admin"}),
    )

    check = verify(server)

    assert check["ok"] is False
    assert any("entry 3" in p for p in check["problems"]), check


def test_editing_the_actor_of_an_entry_is_detected(server: Server) -> None:
    count = some_history(server)
    signed = audit(server, action="approval.signed")[0]
    tamper(db_path(server), "UPDATE audit_entries SET actor = 'admin' WHERE seq = ?", signed["seq"])

    check = verify(server)

    assert check["ok"] is False
    assert check["entries"] == count
    assert any(f"entry {signed['seq']}" in p for p in check["problems"]), check


def test_rewriting_an_entry_with_a_recomputed_hash_breaks_the_chain_after_it(
    server: Server,
) -> None:
    some_history(server)
    conn = sqlite3.connect(db_path(server))
    try:
        prev, seq, ts, actor, action, subject = conn.execute(
            "SELECT prev_hash, seq, ts, actor, action, subject FROM audit_entries WHERE seq = 2"
        ).fetchone()
        forged = {"name": "mallory", "role": "admin"}
        digest = entry_hash(prev, seq, ts, actor, action, subject, forged)
        with conn:
            conn.execute(
                "UPDATE audit_entries SET data = ?, hash = ? WHERE seq = 2",
                (json.dumps(forged), digest),
            )
    finally:
        conn.close()

    check = verify(server)

    assert check["ok"] is False
    assert any("entry 3" in p and "previous hash" in p for p in check["problems"]), check


def test_deleting_an_entry_in_the_middle_is_detected(server: Server) -> None:
    count = some_history(server)
    tamper(db_path(server), "DELETE FROM audit_entries WHERE seq = ?", count // 2)

    check = verify(server)

    assert check["ok"] is False
    assert check["entries"] == count - 1
    assert any("missing" in p for p in check["problems"]), check


def test_deleting_the_newest_entry_is_detected(server: Server) -> None:
    count = some_history(server)
    tamper(db_path(server), "DELETE FROM audit_entries WHERE seq = ?", count)

    check = verify(server)

    assert check["ok"] is False
    assert check["entries"] == count - 1
    assert any("newest" in p for p in check["problems"]), check


# ---- the CLI ------------------------------------------------------------------------------
def cli(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = {"PATH": os.environ["PATH"], "ONGRID_DATA_DIR": str(data_dir)}
    return subprocess.Popen(
        [CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def outcome(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_the_cli_verifies_the_chain_and_lists_entries(
    tmp_path: Path, skills_root: Path, folders: dict[str, Path]
) -> None:
    settings = make_settings(tmp_path, skills_root)
    with running_app(settings) as server:
        run = requested(server, "set_flag", "olga")
        count = some_history(server)
    data_dir = Path(settings.data_dir)

    # both read-only commands at once: each CLI start costs about two seconds of imports
    verifying = cli(data_dir, "audit", "verify")
    listing = cli(data_dir, "audit", "list", "--limit", "1000")
    code, _out, err = outcome(verifying)
    assert code == 0, err
    assert f"{count} entries, intact" in err
    code, out, err = outcome(listing)
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["SEQ", "TIME", "ACTOR", "ACTION", "SUBJECT", "DATA"]
    assert len(rows) == count
    assert "approval.requested" in out
    assert run["approval_id"] in out
    assert "execution.finished" in out

    tamper(data_dir / "ongrid.db", "UPDATE audit_entries SET actor = 'nobody' WHERE seq = 2")
    code, out, err = outcome(cli(data_dir, "audit", "verify"))
    assert code == 1
    assert "entry 2" in out
    assert "TAMPERED" in err
