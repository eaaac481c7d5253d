"""Approval rules of SPEC §5 through the REST API, on a real store with real skill processes."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.settings import Settings
from tests.support.processes import alive, read_pid
from tests.support.server import Server, make_settings, running_app
from tests.support.skills import MakeSkill
from tests.support.waiting import wait_for

# Records each call it receives (so a test can tell whether and how often it ran), logs one
# stderr line, and echoes its stdin: the result is exactly the args the skill was given.
ECHO = """#!/bin/sh
input=$(cat)
printf '%s\\n' "$input" >> calls.log
echo "applying change" >&2
printf '%s\\n' "$input"
"""
SCHEMA = {
    "type": "object",
    "properties": {
        "target": {"type": "string"},
        "count": {"type": "integer"},
        "note": {"type": "string"},
    },
    "required": ["target"],
}
ARGS = {"target": "db-01", "count": 3, "note": 'frozen ✓ "quoted" \\ back'}


def execution(server: Server, execution_id: str) -> dict[str, Any]:
    response = server.call("GET", f"/v1/executions/{execution_id}", "vera")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def approval(server: Server, approval_id: str) -> dict[str, Any]:
    response = server.call("GET", f"/v1/approvals/{approval_id}", "vera")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def request(server: Server, skill: str, who: str, args: Any = None, **body: Any) -> dict[str, Any]:
    response = server.call(
        "POST",
        f"/v1/skills/{skill}/execute",
        who,
        json={"args": ARGS if args is None else args, **body},
    )
    assert response.status_code == 202, response.text
    out: dict[str, Any] = response.json()
    assert out["status"] == "pending_approval"
    assert out["approval_id"]
    return out


def approve(server: Server, approval_id: str, who: str, **body: Any) -> Any:
    return server.call("POST", f"/v1/approvals/{approval_id}/approve", who, json=body or None)


def reject(server: Server, approval_id: str, who: str, **body: Any) -> Any:
    return server.call("POST", f"/v1/approvals/{approval_id}/reject", who, json=body or None)


def error_code(response: Any) -> str:
    code: str = response.json()["error"]["code"]
    return code


def calls(folder: Path) -> list[Any]:
    log = folder / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def folders(make_skill: MakeSkill) -> dict[str, Path]:
    return {
        "set_flag": make_skill("set_flag", ECHO, schema=SCHEMA, **{"class": "mutating"}),
        "drop_table": make_skill("drop_table", ECHO, schema=SCHEMA, **{"class": "dangerous"}),
    }


@pytest.fixture
def server_skills(folders: dict[str, Path]) -> dict[str, Path]:
    return folders


@pytest.fixture
def server_settings(
    tmp_path: Path, skills_root: Path, server_skills: Any, database_url: str | None
) -> Settings:
    """Every test of the desk on both engines: the embedded SQLite store, then PostgreSQL."""
    return make_settings(tmp_path, skills_root, database_url=database_url)


# ---- mutating: one confirmation ------------------------------------------------------------
def test_a_mutating_call_without_confirm_waits_in_the_approval_inbox_and_does_not_run(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "set_flag", "olga")

    assert pending["requested_by"] == "olga"
    assert pending["result"] is None
    assert execution(server, pending["id"])["status"] == "pending_approval"
    inbox = server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"]
    assert [a["id"] for a in inbox] == [pending["approval_id"]]
    item = inbox[0]
    assert item["execution_id"] == pending["id"]
    assert item["skill"] == "set_flag"
    assert item["class"] == "mutating"
    assert item["args"] == ARGS
    assert item["requested_by"] == "olga"
    assert item["signatures_required"] == 1
    assert item["signatures_collected"] == 0
    assert item["definition_hash"]
    assert calls(folders["set_flag"]) == []


def test_another_operator_approving_runs_the_call_server_side_with_the_frozen_args(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "set_flag", "olga")

    response = approve(server, pending["approval_id"], "oscar", comment="looks right")

    assert response.status_code == 200, response.text
    decided = response.json()
    assert decided["status"] == "approved"
    assert [(s["principal"], s["decision"], s["comment"]) for s in decided["signatures"]] == [
        ("oscar", "approve", "looks right")
    ]
    done = server.final(pending["id"])
    assert done["status"] == "succeeded"
    assert done["result"] == ARGS  # the skill echoed exactly the args that were signed
    assert done["args"] == ARGS
    assert done["requested_by"] == "olga"
    assert done["approval_id"] == pending["approval_id"]
    assert done["exit_code"] == 0
    assert done["stderr_tail"] == "applying change\n"
    assert calls(folders["set_flag"]) == [ARGS]
    assert server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"] == []


def test_a_human_requester_confirming_a_mutating_call_runs_it_at_once(
    server: Server, folders: dict[str, Path]
) -> None:
    response = server.call(
        "POST", "/v1/skills/set_flag/execute", "olga", json={"args": ARGS, "confirm": True}
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "succeeded"
    assert body["result"] == ARGS
    assert body["approval_id"] is None
    assert calls(folders["set_flag"]) == [ARGS]
    assert server.call("GET", "/v1/approvals", "vera").json()["items"] == []


def test_a_viewer_may_not_even_request_a_mutating_call(
    server: Server, folders: dict[str, Path]
) -> None:
    response = server.call(
        "POST", "/v1/skills/set_flag/execute", "vera", json={"args": ARGS, "confirm": True}
    )

    assert response.status_code == 403
    assert error_code(response) == "denied"
    assert calls(folders["set_flag"]) == []


# ---- dangerous: two distinct admin signers --------------------------------------------------
def test_a_dangerous_call_needs_two_distinct_admin_signers(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "drop_table", "olga")
    approval_id = pending["approval_id"]
    assert approval(server, approval_id)["signatures_required"] == 2

    first = approve(server, approval_id, "admin")
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "pending"
    assert first.json()["signatures_collected"] == 1
    assert execution(server, pending["id"])["status"] == "pending_approval"
    assert calls(folders["drop_table"]) == []

    by_operator = approve(server, approval_id, "oscar")
    assert by_operator.status_code == 403
    assert error_code(by_operator) == "forbidden"

    second = approve(server, approval_id, "admin2")
    assert second.status_code == 200, second.text
    assert second.json()["status"] == "approved"
    assert [s["principal"] for s in second.json()["signatures"]] == ["admin", "admin2"]
    done = server.final(pending["id"])
    assert done["status"] == "succeeded"
    assert done["result"] == ARGS
    assert calls(folders["drop_table"]) == [ARGS]


def test_an_operator_may_never_sign_a_dangerous_call(server: Server) -> None:
    pending = request(server, "drop_table", "admin")

    for who in ("olga", "oscar"):
        response = approve(server, pending["approval_id"], who)
        assert response.status_code == 403
        assert error_code(response) == "forbidden"
    assert approval(server, pending["approval_id"])["signatures"] == []


def test_an_admin_requester_who_confirms_a_dangerous_call_is_its_first_signer(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "drop_table", "admin", confirm=True)
    approval_id = pending["approval_id"]
    state = approval(server, approval_id)
    assert state["signatures_required"] == 2
    assert state["signatures_collected"] == 1
    assert [s["principal"] for s in state["signatures"]] == ["admin"]
    assert calls(folders["drop_table"]) == []

    own = approve(server, approval_id, "admin")
    assert own.status_code == 403

    second = approve(server, approval_id, "admin2")
    assert second.status_code == 200, second.text
    assert second.json()["status"] == "approved"
    assert server.final(pending["id"])["status"] == "succeeded"
    assert calls(folders["drop_table"]) == [ARGS]


def test_an_operator_requesters_confirmation_is_no_dangerous_signature(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "drop_table", "olga", confirm=True)
    approval_id = pending["approval_id"]
    assert approval(server, approval_id)["signatures_collected"] == 0

    assert approve(server, approval_id, "admin").json()["status"] == "pending"
    assert calls(folders["drop_table"]) == []
    assert approve(server, approval_id, "admin2").json()["status"] == "approved"
    assert server.final(pending["id"])["status"] == "succeeded"


def test_a_dangerous_call_without_confirm_needs_two_admins_other_than_the_requester(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "drop_table", "admin")
    approval_id = pending["approval_id"]
    assert approval(server, approval_id)["signatures_collected"] == 0

    assert approve(server, approval_id, "admin").status_code == 403
    assert approve(server, approval_id, "admin2").json()["status"] == "pending"
    assert calls(folders["drop_table"]) == []


# ---- who may sign, and how often ----------------------------------------------------------
def test_nobody_approves_their_own_request(server: Server, folders: dict[str, Path]) -> None:
    pending = request(server, "set_flag", "olga")

    response = approve(server, pending["approval_id"], "olga")

    assert response.status_code == 403
    assert error_code(response) == "forbidden"
    assert approval(server, pending["approval_id"])["status"] == "pending"
    assert execution(server, pending["id"])["status"] == "pending_approval"
    assert calls(folders["set_flag"]) == []


def test_one_principal_signs_a_request_at_most_once(server: Server) -> None:
    pending = request(server, "drop_table", "olga")
    approval_id = pending["approval_id"]
    assert approve(server, approval_id, "admin").status_code == 200

    again = approve(server, approval_id, "admin")
    assert again.status_code == 409
    assert error_code(again) == "conflict"
    change_of_mind = reject(server, approval_id, "admin")
    assert change_of_mind.status_code == 409

    state = approval(server, approval_id)
    assert state["status"] == "pending"
    assert [s["principal"] for s in state["signatures"]] == ["admin"]


def test_a_viewer_can_neither_approve_nor_reject(server: Server) -> None:
    pending = request(server, "set_flag", "olga")

    for decide in (approve, reject):
        response = decide(server, pending["approval_id"], "vera")
        assert response.status_code == 403
        assert error_code(response) == "forbidden"
    assert approval(server, pending["approval_id"])["status"] == "pending"


def test_a_rejection_by_any_signer_ends_the_request(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "drop_table", "olga")
    approval_id = pending["approval_id"]
    assert approve(server, approval_id, "admin").json()["status"] == "pending"

    response = reject(server, approval_id, "admin2", comment="not during business hours")

    assert response.status_code == 200, response.text
    state = response.json()
    assert state["status"] == "rejected"
    assert state["reason"] == "not during business hours"
    assert [(s["principal"], s["decision"]) for s in state["signatures"]] == [
        ("admin", "approve"),
        ("admin2", "reject"),
    ]
    ended = execution(server, pending["id"])
    assert ended["status"] == "rejected"
    assert ended["error"]["code"] == "rejected"
    assert ended["finished_at"] is not None
    assert approve(server, approval_id, "oscar").status_code == 409
    assert calls(folders["drop_table"]) == []


def test_an_operator_rejecting_a_mutating_request_ends_it(server: Server) -> None:
    pending = request(server, "set_flag", "olga")

    assert reject(server, pending["approval_id"], "oscar").json()["status"] == "rejected"
    assert execution(server, pending["id"])["status"] == "rejected"


def test_deciding_an_approval_that_is_no_longer_pending_is_a_conflict(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "set_flag", "olga")
    approval_id = pending["approval_id"]
    assert approve(server, approval_id, "oscar").status_code == 200
    server.final(pending["id"])

    for who, decide in (("admin", approve), ("admin2", reject)):
        response = decide(server, approval_id, who)
        assert response.status_code == 409
        assert error_code(response) == "conflict"
    assert calls(folders["set_flag"]) == [ARGS]  # ran once, never again


def test_an_unknown_approval_is_not_found(server: Server) -> None:
    response = approve(server, "0" * 32, "admin")

    assert response.status_code == 404
    assert error_code(response) == "not_found"


# ---- expiry -------------------------------------------------------------------------------
@pytest.fixture
def short_lived(tmp_path: Path, skills_root: Path, folders: dict[str, Path]) -> Iterator[Server]:
    settings = make_settings(tmp_path, skills_root, approval_ttl_seconds=1)
    with running_app(settings) as app:
        yield app


def later(seconds: float) -> Callable[[], float]:
    return lambda: time.time() + seconds


def test_a_request_expires_after_the_approval_ttl(
    short_lived: Server, folders: dict[str, Path]
) -> None:
    server = short_lived
    pending = request(server, "set_flag", "olga")
    approval_id = pending["approval_id"]
    server.manager.clock = later(3600)

    state = approval(server, approval_id)
    assert state["status"] == "expired"
    assert state["reason"] == "the request expired"
    ended = execution(server, pending["id"])
    assert ended["status"] == "expired"
    assert ended["error"]["code"] == "expired"
    response = approve(server, approval_id, "oscar")
    assert response.status_code == 409
    assert calls(folders["set_flag"]) == []


def test_an_expired_request_cannot_be_approved_even_if_nobody_looked_first(
    short_lived: Server, folders: dict[str, Path]
) -> None:
    server = short_lived
    pending = request(server, "set_flag", "olga")
    server.manager.clock = later(3600)

    response = approve(server, pending["approval_id"], "oscar")

    assert response.status_code == 409
    assert execution(server, pending["id"])["status"] == "expired"
    assert calls(folders["set_flag"]) == []


def test_the_inbox_no_longer_lists_an_expired_request_as_pending(short_lived: Server) -> None:
    server = short_lived
    pending = request(server, "set_flag", "olga")
    server.manager.clock = later(3600)

    assert server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"] == []
    expired = server.call("GET", "/v1/approvals?status=expired", "vera").json()["items"]
    assert [a["id"] for a in expired] == [pending["approval_id"]]


def test_the_sweeper_expires_a_request_nobody_looks_at(short_lived: Server) -> None:
    server = short_lived
    pending = request(server, "set_flag", "olga")
    server.manager.clock = later(3600)

    def expired() -> bool:
        found = server.store.approvals.get(pending["approval_id"])
        return found is not None and found.status == "expired"

    wait_for(expired, "the background sweeper to expire the request", timeout=10)
    stored = server.store.executions.get(pending["id"])
    assert stored is not None
    assert stored.status.value == "expired"


def test_a_request_does_not_expire_before_its_ttl(short_lived: Server) -> None:
    server = short_lived
    pending = request(server, "set_flag", "olga")
    server.manager.clock = later(-3600)  # whatever the wall clock says, not yet due

    assert approval(server, pending["approval_id"])["status"] == "pending"
    assert approve(server, pending["approval_id"], "oscar").status_code == 200
    assert server.final(pending["id"])["status"] == "succeeded"


# ---- a changed skill voids the request ------------------------------------------------------
def rewrite_manifest(folder: Path, **changes: Any) -> None:
    manifest = json.loads((folder / "skill.json").read_text())
    manifest.update(changes)
    (folder / "skill.json").write_text(json.dumps(manifest))


def reload(server: Server) -> None:
    response = server.call("POST", "/v1/reload", "admin")
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "change",
    [
        {"timeout_seconds": 7},
        {"schema": {**SCHEMA, "additionalProperties": False}},
        {"class": "dangerous"},
    ],
    ids=["timeout", "schema", "class"],
)
def test_a_request_is_void_when_the_skill_changed_before_the_last_signature(
    server: Server, folders: dict[str, Path], change: dict[str, Any]
) -> None:
    pending = request(server, "set_flag", "olga")
    rewrite_manifest(folders["set_flag"], **change)
    reload(server)

    response = approve(server, pending["approval_id"], "admin")

    assert response.status_code == 409
    assert error_code(response) == "conflict"
    state = approval(server, pending["approval_id"])
    assert state["status"] == "void"
    assert "changed" in state["reason"]
    ended = execution(server, pending["id"])
    assert ended["status"] == "rejected"
    assert ended["error"]["code"] == "skill_changed"
    assert calls(folders["set_flag"]) == []


def test_a_request_is_void_when_the_executable_was_replaced_even_without_a_reload(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "set_flag", "olga")
    entry = folders["set_flag"] / "run"
    entry.write_text(ECHO + "echo 'and something the signers never saw' >&2\n")

    response = approve(server, pending["approval_id"], "oscar")

    assert response.status_code == 409
    assert approval(server, pending["approval_id"])["status"] == "void"
    assert execution(server, pending["id"])["error"]["code"] == "skill_changed"
    assert calls(folders["set_flag"]) == []


@pytest.mark.parametrize("reloaded", [False, True], ids=["no-reload", "reload"])
def test_a_request_is_void_when_the_entry_was_rewritten_in_place_with_its_times_restored(
    server: Server, folders: dict[str, Path], reloaded: bool
) -> None:
    pending = request(server, "set_flag", "olga")
    entry = folders["set_flag"] / "run"
    before = entry.stat()
    original = entry.read_bytes()
    # Same length, same inode, atime and mtime put back (``touch -r``): only ctime moves.
    forged = original.replace(b"applying change", b"dropping tables")
    assert len(forged) == len(original) and forged != original
    with entry.open("r+b") as f:
        f.write(forged)
    os.utime(entry, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = entry.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    if reloaded:
        reload(server)

    response = approve(server, pending["approval_id"], "oscar")

    assert response.status_code == 409, response.text
    assert error_code(response) == "conflict"
    assert approval(server, pending["approval_id"])["status"] == "void"
    ended = execution(server, pending["id"])
    assert ended["status"] == "rejected"
    assert ended["error"]["code"] == "skill_changed"
    assert calls(folders["set_flag"]) == []


def test_a_request_is_void_when_its_skill_was_removed(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "set_flag", "olga")
    (folders["set_flag"] / "skill.json").unlink()
    reload(server)

    assert approve(server, pending["approval_id"], "oscar").status_code == 409
    assert approval(server, pending["approval_id"])["status"] == "void"
    assert execution(server, pending["id"])["error"]["code"] == "skill_changed"


def test_a_partly_signed_dangerous_request_is_void_when_the_skill_changed(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "drop_table", "olga")
    assert approve(server, pending["approval_id"], "admin").status_code == 200
    rewrite_manifest(folders["drop_table"], timeout_seconds=9)
    reload(server)

    assert approve(server, pending["approval_id"], "admin2").status_code == 409
    assert approval(server, pending["approval_id"])["status"] == "void"
    assert calls(folders["drop_table"]) == []


def test_a_reload_that_changes_nothing_keeps_the_request_valid(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "set_flag", "olga")
    reload(server)

    assert approve(server, pending["approval_id"], "oscar").status_code == 200
    assert server.final(pending["id"])["status"] == "succeeded"
    assert calls(folders["set_flag"]) == [ARGS]


# ---- cancel -------------------------------------------------------------------------------
def test_cancelling_a_pending_call_cancels_its_approval(
    server: Server, folders: dict[str, Path]
) -> None:
    pending = request(server, "set_flag", "olga")

    not_theirs = server.call("POST", f"/v1/executions/{pending['id']}/cancel", "vera")
    assert not_theirs.status_code == 403
    response = server.call("POST", f"/v1/executions/{pending['id']}/cancel", "olga")

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    assert response.json()["error"]["code"] == "cancelled"
    assert approval(server, pending["approval_id"])["status"] == "cancelled"
    assert approve(server, pending["approval_id"], "oscar").status_code == 409
    again = server.call("POST", f"/v1/executions/{pending['id']}/cancel", "olga")
    assert again.status_code == 409
    assert calls(folders["set_flag"]) == []


# A skill that leaves a grandchild behind which would outlive it, records both pids, then blocks.
HOLD = """#!/bin/sh
cat >/dev/null
sleep 300 &
echo $! > grandchild.tmp && mv grandchild.tmp grandchild.pid
echo $$ > main.tmp && mv main.tmp main.pid
echo "holding the lock" >&2
wait
echo '{"held": true}'
"""


def test_cancelling_a_running_call_kills_its_whole_process_group(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    folder = make_skill("hold_lock", HOLD, timeout_seconds=120)
    with running_app(make_settings(tmp_path, skills_root)) as server:
        started = server.call(
            "POST", "/v1/skills/hold_lock/execute", "olga", json={"args": {}, "wait": False}
        )
        assert started.status_code == 202, started.text
        assert started.json()["status"] == "running"
        main = wait_for(lambda: read_pid(folder / "main.pid"), "the skill to start")
        grandchild = wait_for(lambda: read_pid(folder / "grandchild.pid"), "the grandchild")
        assert alive(main)
        assert alive(grandchild)

        response = server.call("POST", f"/v1/executions/{started.json()['id']}/cancel", "oscar")

        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "cancelled"
        assert body["error"]["code"] == "cancelled"
        assert execution(server, body["id"])["status"] == "cancelled"
        wait_for(lambda: not alive(main), "the skill process to die", timeout=5)
        wait_for(lambda: not alive(grandchild), "the grandchild to die", timeout=5)
        again = server.call("POST", f"/v1/executions/{body['id']}/cancel", "oscar")
        assert again.status_code == 409


# ---- events -------------------------------------------------------------------------------
def parse_sse(lines: list[str]) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    kind, data = "message", ""
    for line in lines:
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
        elif not line and data:
            events.append((kind, json.loads(data)))
            kind, data = "message", ""
    return events


class Follower:
    """Reads an execution's SSE stream in a thread, line by line, as it arrives."""

    def __init__(self, server: Server, execution_id: str) -> None:
        self.lines: list[str] = []
        self.arrived = threading.Condition()  # notified with each line
        self.status: int | None = None
        self.thread = threading.Thread(target=self._read, args=(server, execution_id))
        self.thread.start()

    def _read(self, server: Server, execution_id: str) -> None:
        url = f"/v1/executions/{execution_id}/events"
        with server.client.stream("GET", url, headers=server.as_("vera")) as response:
            self.status = response.status_code
            for line in response.iter_lines():
                with self.arrived:
                    self.lines.append(line)
                    self.arrived.notify_all()

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        with self.arrived:
            return parse_sse(list(self.lines))

    def wait_events(self, count: int, timeout: float = 15) -> list[tuple[str, dict[str, Any]]]:
        """Block until the stream delivered ``count`` events (fail after ``timeout`` s)."""
        with self.arrived:
            arrived = self.arrived.wait_for(
                lambda: len(parse_sse(list(self.lines))) >= count, timeout
            )
        assert arrived, f"the stream delivered {self.events()}, not {count} events"
        return self.events()

    def join(self) -> list[tuple[str, dict[str, Any]]]:
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), "the event stream did not end"
        assert self.status == 200
        return self.events()


def test_the_event_stream_of_a_pending_call_follows_it_through_approval_to_the_end(
    server: Server,
) -> None:
    pending = request(server, "set_flag", "olga")
    follower = Follower(server, pending["id"])
    assert [kind for kind, _ in follower.wait_events(1)] == ["approval_pending"]
    # the stream is live and waiting, not finished
    assert follower.thread.is_alive()

    assert approve(server, pending["approval_id"], "oscar").status_code == 200
    events = follower.join()

    kinds = [kind for kind, _ in events]
    assert kinds == ["approval_pending", "status", "stderr", "status", "end"]
    assert events[0][1]["approval_id"] == pending["approval_id"]
    assert events[0][1]["signatures_required"] == 1
    assert events[1][1]["status"] == "running"
    assert events[2][1]["line"] == "applying change"
    assert events[3][1]["status"] == "succeeded"
    assert events[4][1]["status"] == "succeeded"
    assert events[4][1]["result"] == ARGS
    ids = [line[3:].strip() for line in follower.lines if line.startswith("id:")]
    assert ids == ["1", "2", "3", "4"]


def test_the_event_stream_replays_a_finished_approved_call_from_the_store(
    server: Server,
) -> None:
    pending = request(server, "set_flag", "olga")
    approve(server, pending["approval_id"], "oscar")
    server.final(pending["id"])
    wait_for(lambda: server.manager.hub.get(pending["id"]) is None, "the timeline to close")

    response = server.call("GET", f"/v1/executions/{pending['id']}/events", "vera")

    events = parse_sse(response.text.splitlines())
    assert [kind for kind, _ in events] == ["approval_pending", "status", "stderr", "status", "end"]


def test_the_event_stream_of_a_pending_call_ends_when_it_is_rejected(server: Server) -> None:
    pending = request(server, "set_flag", "olga")
    follower = Follower(server, pending["id"])
    follower.wait_events(1)

    assert reject(server, pending["approval_id"], "oscar").status_code == 200
    events = follower.join()

    assert [kind for kind, _ in events] == ["approval_pending", "status", "end"]
    assert events[1][1]["status"] == "rejected"
    assert events[2][1]["status"] == "rejected"
