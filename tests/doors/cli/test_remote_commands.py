"""``approvals …`` and ``executions …`` against a real ``serve``: ids by unique prefix (ambiguous
ones refused with the candidates), ``executions cancel``, ``executions logs -f`` ending with the
call's code, and ``approvals watch`` printing the inbox as it changes until Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.doors.stream_guard import RECHECK_SECONDS, TICK_SECONDS
from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.store import open_store
from ongrid_skills.store.approvals import Approval
from tests.doors.cli.test_remote_run import TALKER
from tests.support.cli import run_cli
from tests.support.proxy import proxy_to
from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_skill
from tests.support.sockets import free_port

#: Two requests whose ids share the prefix ``abcd`` (written straight into the store).
TWINS = ["abcd0" + "0" * 27, "abcd1" + "1" * 27]


def write_skills(root: Path) -> None:
    write_skill(root, "talker", TALKER)
    write_skill(root, "fail", "#!/bin/sh\ncat >/dev/null\necho oops >&2\nexit 1\n")
    write_skill(root, "disk_clean", **{"class": "mutating"})
    write_skill(root, "reboot", **{"class": "dangerous"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    running = serve_for_cli(tmp_path_factory.mktemp("remote-commands"), write_skills)
    store = open_store(str(running.process.data_dir), None)  # beside the server, as a replica
    try:
        with store.tx() as conn:
            for ident in TWINS:
                execution = Execution(skill="disk_clean", args={}, id=ident)
                execution.status, execution.approval_id = Status.PENDING_APPROVAL, ident
                store.executions.insert(conn, execution)
                store.approvals.insert(conn, twin(ident))
    finally:
        store.close()
    try:
        yield running
    finally:
        stop(running.process)


def twin(ident: str) -> Approval:
    now = time.time()
    return Approval(
        id=ident,
        execution_id=ident,
        skill="disk_clean",
        skill_class="mutating",
        args={},
        definition_hash="0" * 64,
        persona=None,
        requested_by="olga",
        signatures_required=1,
        status="pending",
        created_at=now,
        expires_at=now + 3600,
    )


def lines_until(stream: Any, text: str, limit: int = 50) -> list[str]:
    """The lines read from ``stream`` up to the first that holds ``text`` (the pipe's reads
    block: the deadline is the process's own end)."""
    seen = []
    for _ in range(limit):
        line = stream.readline()
        assert line, seen
        seen.append(line.rstrip("\n"))
        if text in line:
            return seen
    raise AssertionError(seen)


# ---- ids by prefix -----------------------------------------------------------------------------
def test_a_unique_prefix_names_an_approval(served: Served) -> None:
    pending = served.execute("disk_clean")
    approval_id = pending["approval_id"]
    shown = served.cli("approvals", "show", approval_id[:8], who="vera")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["id"] == approval_id
    upper = served.cli("approvals", "show", approval_id[:6].upper(), who="vera")
    assert json.loads(upper.stdout)["id"] == approval_id
    approved = served.cli("approvals", "approve", approval_id[:6], "--comment", "ok", who="oscar")
    assert approved.exit_code == 0, approved.output
    assert json.loads(approved.stdout)["status"] == "approved"
    assert served.final(pending["id"])["status"] == "succeeded"


def test_an_ambiguous_prefix_is_refused_with_the_candidates(served: Served) -> None:
    for args in (("approvals", "show", "abcd"), ("approvals", "reject", "ABCD")):
        result = served.cli(*args, who="oscar")
        assert result.exit_code == 2, result.output
        assert "'abcd' is ambiguous" in result.stderr.lower()
        for ident in TWINS:
            assert f"  {ident}  pending   disk_clean  by olga" in result.stderr
        assert result.stdout == ""
    for ident in TWINS:
        assert served.http("GET", f"/v1/approvals/{ident}").json()["status"] == "pending"
    executions = served.cli("executions", "show", "abcd", who="vera")
    assert executions.exit_code == 2
    assert all(ident in executions.stderr for ident in TWINS)
    one = served.cli("approvals", "show", "abcd1", who="vera")
    assert json.loads(one.stdout)["id"] == TWINS[1]


@pytest.mark.parametrize("kind", ["approvals", "executions"])
def test_a_prefix_that_matches_nothing_or_is_too_short_exits_2(served: Served, kind: str) -> None:
    nothing = served.cli(kind, "show", "abcf", who="vera")
    assert nothing.exit_code == 2
    assert f"no {kind[:-1]} id starts with 'abcf'" in nothing.stderr
    short = served.cli(kind, "show", "abc", who="vera")
    assert short.exit_code == 2
    assert "too short" in short.stderr
    garbage = served.cli(kind, "show", "not-an-id", who="vera")
    assert garbage.exit_code == 2
    assert "not_found" in garbage.stderr


# ---- executions --------------------------------------------------------------------------------
def test_executions_cancel_by_prefix_stops_a_running_call(served: Served, tmp_path: Path) -> None:
    started = served.execute("talker", args={"gate": str(tmp_path / "never")}, wait=False)
    result = served.cli("executions", "cancel", started["id"][:10])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "cancelled"
    assert f"{started['id']} cancelled" in result.stderr
    again = served.cli("executions", "cancel", started["id"])
    assert again.exit_code == 2
    assert "conflict" in again.stderr


def test_executions_cancel_withdraws_a_pending_request(served: Served) -> None:
    pending = served.execute("disk_clean")
    result = served.cli("executions", "cancel", pending["id"][:8])
    assert result.exit_code == 0, result.output
    assert served.http("GET", f"/v1/approvals/{pending['approval_id']}").json()["status"] == (
        "cancelled"
    )
    viewer = served.cli("executions", "cancel", served.execute("disk_clean")["id"], who="vera")
    assert viewer.exit_code == 3


def test_executions_logs_follow_exits_with_the_calls_code(served: Served) -> None:
    failed = served.execute("fail")
    followed = served.cli("executions", "logs", "-f", failed["id"][:8], who="vera")
    assert followed.exit_code == 1, followed.output
    assert "oops" in followed.stdout.splitlines()
    assert followed.stderr.strip().endswith("[end] failed")
    snapshot = served.cli("executions", "logs", failed["id"], who="vera")
    assert snapshot.exit_code == 0  # without -f: it printed the log


@pytest.mark.parametrize(("decision", "code"), [("approve", 0), ("reject", 3)])
def test_executions_logs_follow_waits_through_a_pending_approval(
    served: Served, decision: str, code: int
) -> None:
    pending = served.execute("disk_clean")
    with served.script("executions", "logs", "-f", pending["id"], who="vera") as proc:
        assert proc.stdout is not None
        lines_until(proc.stdout, "[approval_pending]")
        served.http("POST", f"/v1/approvals/{pending['approval_id']}/{decision}", "oscar")
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert err.strip().endswith("succeeded" if code == 0 else "rejected")


def test_executions_logs_follow_survives_a_cut_stream(served: Served, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    started = served.execute("talker", args={"gate": str(gate)}, wait=False)
    port = int(served.url.rsplit(":", 1)[1])
    with proxy_to(port) as proxy:
        proxy.cut_after(b"first line")
        with served.script("executions", "logs", "-f", started["id"], url=proxy.url) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            assert proc.stderr.readline() == f"→ {proxy.url} (ONGRID_URL)\n"
            assert "reconnecting to" in proc.stderr.readline()
            gate.touch()
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.count("first line") == 1
    assert "second line" in out.splitlines()


# ---- approvals watch ---------------------------------------------------------------------------
def test_watch_prints_requests_and_decisions_as_they_happen_until_ctrl_c(served: Served) -> None:
    with served.script("approvals", "watch", who="vera") as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stderr.readline() == f"→ {served.url} (ONGRID_URL)\n"
        started = proc.stderr.readline()
        assert f"watching the approvals of {served.url}" in started
        assert "Ctrl-C to stop" in started
        backlog = [proc.stdout.readline() for _ in TWINS]  # among the pending ones, oldest first
        assert all(line.startswith("requested ") for line in backlog)

        mutating = served.execute("disk_clean", args={"path": "/var/tmp"})["approval_id"]
        line = lines_until(proc.stdout, mutating)[-1]
        assert line.split()[:2] == ["requested", mutating]
        assert '0/1 by olga  args={"path": "/var/tmp"}' in line
        served.http("POST", f"/v1/approvals/{mutating}/approve", "oscar")
        line = lines_until(proc.stdout, mutating)[-1]
        assert line.split()[:2] == ["approved", mutating]
        assert line.endswith("1/1 by olga  signed by oscar")

        dangerous = served.execute("reboot")["approval_id"]
        lines_until(proc.stdout, dangerous)
        served.http("POST", f"/v1/approvals/{dangerous}/approve", "admin")
        assert lines_until(proc.stdout, dangerous)[-1].split()[:2] == ["signed", dangerous]
        served.http("POST", f"/v1/approvals/{dangerous}/reject", "admin2", json={"comment": "no"})
        line = lines_until(proc.stdout, dangerous)[-1]
        assert line.split()[:2] == ["rejected", dangerous]
        assert line.endswith("(no)")

        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_watch_json_prints_one_event_per_line(served: Served) -> None:
    with served.script("approvals", "watch", "--json", who="vera") as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stderr.readline()
        pending = served.execute("disk_clean")["approval_id"]
        line = lines_until(proc.stdout, pending)[-1]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    event = json.loads(line)
    assert event["event"] == "requested"
    assert event["approval"] == served.http("GET", f"/v1/approvals/{pending}").json()


def test_watch_reconnects_and_prints_no_request_twice(served: Served) -> None:
    port = int(served.url.rsplit(":", 1)[1])
    with proxy_to(port) as proxy:
        proxy.cut_after(b"event: ready")
        with served.script("approvals", "watch", url=proxy.url) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            assert proc.stderr.readline().startswith("→ ")  # the server it asks
            assert "watching" in proc.stderr.readline()
            assert "reconnecting to" in proc.stderr.readline()
            assert "reconnected" in proc.stderr.readline()
            pending = served.execute("disk_clean")["approval_id"]
            seen = lines_until(proc.stdout, pending)
            proc.send_signal(signal.SIGINT)
            rest, _ = proc.communicate(timeout=30)
    ids = [line.split()[1] for line in seen + rest.splitlines()]
    assert len(ids) == len(set(ids))  # the pending requests sent again were not printed again
    assert proc.returncode == 0


def test_watch_with_a_bad_token_or_no_server_exits_2(served: Served) -> None:
    bad = served.cli("approvals", "watch", "--token", "ogs_not-a-real-token", who=None)
    assert bad.exit_code == 2
    assert "unauthorized" in bad.stderr
    nowhere = f"http://127.0.0.1:{free_port()}"
    gone = served.cli("approvals", "watch", url=nowhere)
    assert gone.exit_code == 2
    assert f"cannot reach {nowhere}" in gone.stderr


def test_watch_exits_2_saying_why_once_its_token_is_revoked(served: Served) -> None:
    data_dir = str(served.process.data_dir)
    made = run_cli(
        "token", "create", "--role", "viewer", "--name", "wanda", ONGRID_DATA_DIR=data_dir
    )
    assert made.returncode == 0, made.stderr
    served.tokens["wanda"] = made.stdout.strip()
    with served.script("approvals", "watch", who="wanda") as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("→ ")  # the server it asks
        assert "watching" in proc.stderr.readline()
        assert run_cli("token", "revoke", "wanda", ONGRID_DATA_DIR=data_dir).returncode == 0
        try:
            _, err = proc.communicate(timeout=RECHECK_SECONDS + TICK_SECONDS + 6)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 2, err
    assert "unauthorized: the token is no longer valid (revoked)" in err
    assert "reconnecting" not in err  # the server said why: nothing to retry


def test_watch_keeps_trying_when_the_server_stops_and_ctrl_c_still_exits_0(tmp_path: Path) -> None:
    """The console script with the default 30 s of retries: it says it reconnects, and Ctrl-C
    ends it as always."""
    own = serve_for_cli(tmp_path, write_skills)
    with own.script("approvals", "watch", who="vera") as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("→ ")  # the server it asks
        assert "watching" in proc.stderr.readline()
        stop(own.process)
        assert "reconnecting to" in proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0
