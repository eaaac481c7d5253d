"""Previews of requests (SPEC §20) through the REST API, on a real store with real skill
processes: run at once as a safe call, attached to their own request, shown failed when they
fail, never a reason to run the real call."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.settings import Settings
from ongrid_skills.store import open_store
from tests.support.server import Server, make_settings, running_app
from tests.support.skills import MakeSkill, write_exec
from tests.support.waiting import wait_for

# The real call logs its args to calls.log; a call with dry_run (the preview's merged args)
# logs them to previews.log instead and says what it would change.
SKILL = """#!/bin/sh
input=$(cat)
case $input in
  *'"dry_run":true'*)
    printf '%s\\n' "$input" >> previews.log
    printf '{"would_change": %s}\\n' "$input" ;;
  *)
    printf '%s\\n' "$input" >> calls.log
    printf '%s\\n' "$input" ;;
esac
"""
# A preview entry: says what it would drop, changes nothing.
PLAN = """#!/bin/sh
input=$(cat)
printf '{"would_drop": %s}\\n' "$input"
"""
FAILING_PLAN = """#!/bin/sh
cat >/dev/null
echo "cannot plan: inventory unreachable" >&2
exit 3
"""
SLOW_PLAN = """#!/bin/sh
cat >/dev/null
exec sleep 30
"""
TOKEN = "tok_preview-5a6b7c-LIVE"
SLOT = {
    "slot": "api",
    "fields": ["token"],
    "inject": {
        "env": {"API_TOKEN": "{{token}}"},
        "files": [{"path": "token", "content": "{{token}}"}],
    },
}
# A preview entry that uses the call's credential, and prints it (masked before anyone sees it).
TOKEN_PLAN = """#!/bin/sh
cat >/dev/null
printf '{"would_use": "%s", "file": "%s"}\\n' "$API_TOKEN" "$(cat "$CREDENTIALS_DIRECTORY/token")"
"""
SCHEMA = {
    "type": "object",
    "properties": {"target": {"type": "string"}, "dry_run": {"type": "boolean"}},
    "required": ["target"],
}


@pytest.fixture
def folders(make_skill: MakeSkill) -> dict[str, Path]:
    made = {
        "set_flag": make_skill(
            "set_flag",
            SKILL,
            schema=SCHEMA,
            preview={"args": {"dry_run": True}},
            **{"class": "mutating"},
        ),
        "drop_table": make_skill(
            "drop_table",
            SKILL,
            schema=SCHEMA,
            preview={"entry": "plan.sh"},
            **{"class": "dangerous"},
        ),
        "flaky": make_skill(
            "flaky", SKILL, schema=SCHEMA, preview={"entry": "plan.sh"}, **{"class": "mutating"}
        ),
        "slow": make_skill(
            "slow",
            SKILL,
            schema=SCHEMA,
            preview={"entry": "plan.sh", "timeout_seconds": 1},
            **{"class": "mutating"},
        ),
        "use_token": make_skill(
            "use_token",
            SKILL,
            schema=SCHEMA,
            credentials=[SLOT],
            preview={"entry": "plan.sh"},
            **{"class": "mutating"},
        ),
    }
    made["edited"] = make_skill(
        "edited", SKILL, schema=SCHEMA, preview={"entry": "plan.sh"}, **{"class": "mutating"}
    )
    write_exec(made["edited"], "plan.sh", PLAN)
    write_exec(made["use_token"], "plan.sh", TOKEN_PLAN)
    write_exec(made["drop_table"], "plan.sh", PLAN)
    write_exec(made["flaky"], "plan.sh", FAILING_PLAN)
    write_exec(made["slow"], "plan.sh", SLOW_PLAN)
    return made


@pytest.fixture
def server_skills(folders: dict[str, Path]) -> dict[str, Path]:
    return folders


@pytest.fixture
def server_settings(
    tmp_path: Path, skills_root: Path, server_skills: Any, database_url: str | None
) -> Settings:
    """On both engines: the embedded SQLite store, then PostgreSQL."""
    return make_settings(tmp_path, skills_root, database_url=database_url)


def request(server: Server, skill: str, args: dict[str, Any], who: str = "olga") -> dict[str, Any]:
    response = server.call("POST", f"/v1/skills/{skill}/execute", who, json={"args": args})
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


def previewed(server: Server, approval_id: str, timeout: float = 10) -> dict[str, Any]:
    """The request once its preview has ended."""

    def ended() -> dict[str, Any] | None:
        body: dict[str, Any] = server.call("GET", f"/v1/approvals/{approval_id}", "vera").json()
        run = (body.get("preview") or {}).get("run") or {}
        return body if run.get("status") in ("done", "failed") else None

    return wait_for(ended, "the request's preview", timeout)


def logged(folder: Path, name: str) -> list[Any]:
    log = folder / name
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_mutating_requests_preview_is_attached_and_never_runs_the_real_call(
    server: Server, folders: dict[str, Path]
) -> None:
    args = {"target": "db-01", "dry_run": False}
    pending = request(server, "set_flag", args)

    body = previewed(server, pending["approval_id"])
    run = body["preview"]["run"]
    assert run["status"] == "done" and run["outcome"] == "succeeded"
    merged = {"target": "db-01", "dry_run": True}  # the preview's args over the caller's
    assert json.loads(run["result"]) == {"would_change": merged}
    assert run["timeout_seconds"] == 10 and run["truncated"] is False
    assert body["status"] == "pending" and body["args"] == args  # what signers sign: unchanged
    execution = server.call("GET", f"/v1/executions/{pending['id']}", "vera").json()
    assert execution["status"] == "pending_approval"
    assert logged(folders["set_flag"], "previews.log") == [merged]
    assert logged(folders["set_flag"], "calls.log") == []  # the preview ran nothing real
    [entry] = server.store.audit.entries(action="approval.previewed", subject=body["id"])
    assert entry["actor"] == "manager"
    assert entry["data"]["status"] == "done"
    assert json.loads(entry["data"]["result"]) == {"would_change": merged}

    approved = server.call("POST", f"/v1/approvals/{body['id']}/approve", "oscar")
    assert approved.status_code == 200, approved.text
    assert server.final(pending["id"])["status"] == "succeeded"
    assert logged(folders["set_flag"], "calls.log") == [args]  # the frozen args, as signed
    assert logged(folders["set_flag"], "previews.log") == [merged]  # and no second preview


def test_a_failing_preview_is_shown_failed_and_the_request_stays_pending(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "flaky", {"target": "db-02"})

    body = previewed(server, pending["approval_id"])
    run = body["preview"]["run"]
    assert run["status"] == "failed" and run["outcome"] == "failed"
    assert run["error"] == {"code": "exit_status", "message": "exit status 3"}
    assert "cannot plan: inventory unreachable" in run["stderr_tail"]
    assert "result" not in run
    assert body["status"] == "pending"
    assert body["signatures"] == []
    assert logged(folders["flaky"], "calls.log") == []
    approved = server.call("POST", f"/v1/approvals/{body['id']}/approve", "oscar")
    assert approved.status_code == 200, approved.text  # still the humans' to decide
    assert server.final(pending["id"])["status"] == "succeeded"


def test_a_preview_past_its_timeout_is_killed_and_shown_timed_out(server: Server) -> None:
    started = time.monotonic()
    pending = request(server, "slow", {"target": "db-03"})

    run = previewed(server, pending["approval_id"])["preview"]["run"]

    assert time.monotonic() - started < 8  # 1 s, then TERM and at most 2 s to KILL
    assert run["status"] == "failed" and run["outcome"] == "timed_out"
    assert run["error"]["code"] == "timed_out"
    assert run["timeout_seconds"] == 1


def test_a_dangerous_calls_preview_runs_its_preview_entry_before_anyone_signs(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "drop_table", {"target": "users"})

    body = previewed(server, pending["approval_id"])

    assert body["class"] == "dangerous" and body["signatures_required"] == 2
    assert body["signatures"] == []
    assert json.loads(body["preview"]["run"]["result"]) == {"would_drop": {"target": "users"}}
    assert logged(folders["drop_table"], "calls.log") == []


def test_each_request_gets_its_own_preview(server: Server) -> None:
    first = request(server, "drop_table", {"target": "orders"})
    first_run = previewed(server, first["approval_id"])["preview"]["run"]
    second = request(server, "drop_table", {"target": "invoices"})
    second_run = previewed(server, second["approval_id"])["preview"]["run"]

    assert json.loads(first_run["result"]) == {"would_drop": {"target": "orders"}}
    assert json.loads(second_run["result"]) == {"would_drop": {"target": "invoices"}}
    again = previewed(server, first["approval_id"])["preview"]["run"]
    assert again == first_run  # the first request's preview is bound to it, untouched


def test_a_preview_is_given_the_calls_credentials_and_what_it_prints_of_them_is_masked(
    server: Server,
) -> None:
    made = server.call(
        "POST", "/v1/credentials", "admin", json={"name": "ops", "values": {"token": TOKEN}}
    )
    assert made.status_code == 201, made.text
    bind = {"slot": "api", "skill": "use_token"}
    assert server.call("POST", "/v1/credentials/ops/bind", "admin", json=bind).status_code == 200
    pending = request(server, "use_token", {"target": "vault"})

    body = previewed(server, pending["approval_id"])

    assert body["credentials"] == {"api": "ops"}
    run = body["preview"]["run"]
    assert run["status"] == "done", run
    assert json.loads(run["result"]) == {"would_use": "***", "file": "***"}
    assert TOKEN not in json.dumps(body)
    audit = server.store.audit.entries(action="approval.previewed", subject=body["id"])
    assert audit and TOKEN not in json.dumps(audit)


def test_a_preview_cut_by_a_shutdown_is_shown_failed_and_the_request_stays_pending(
    server_settings: Settings,
) -> None:
    with running_app(server_settings) as app:
        pending = request(app, "slow", {"target": "db-04"})
        store = open_store(server_settings.data_dir, server_settings.database_url)
    try:  # the app has stopped: what it recorded
        approval = store.approvals.get(pending["approval_id"])
    finally:
        store.close()
    assert approval is not None and approval.preview is not None
    run = approval.preview["run"]
    assert run["status"] == "failed" and run["outcome"] == "interrupted"
    assert run["error"]["code"] == "interrupted"
    assert approval.status == "pending"


def test_a_preview_entry_rewritten_since_load_is_not_run(
    server: Server, folders: dict[str, Path]
) -> None:
    plan = folders["edited"] / "plan.sh"
    plan.write_text("#!/bin/sh\ntouch swapped\necho '{}'\n")  # after the load

    pending = request(server, "edited", {"target": "db-05"})
    run = previewed(server, pending["approval_id"])["preview"]["run"]

    assert run["status"] == "failed"
    assert run["error"] == {"code": "skill_changed", "message": f"{plan} changed since load"}
    assert not (folders["edited"] / "swapped").exists()
