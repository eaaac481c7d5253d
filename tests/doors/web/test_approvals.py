"""The approvals inbox over plain HTTP: its live stream (a session required when it opens and
while it lasts, each change with the card rendered for the session), the approve and reject
forms (CSRF, the desk's rules through a forged post, comments), and hostile input."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from ongrid_skills.doors.web import approvals
from tests.support.browser import Console
from tests.support.sse import Sse, read_sse

SSE = {"accept": "text/event-stream"}


def request_restart(console: Console, who: str = "olga", args: Any = None) -> dict[str, Any]:
    """A mutating call as the responder persona: it waits for one signature."""
    response = console.rest(
        "POST",
        "/v1/skills/restart_cache/execute",
        who,
        json={"args": args or {}, "persona": "responder"},
    )
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


def approval_status(console: Console, approval_id: str) -> str:
    approval = console.store.approvals.get(approval_id)
    assert approval is not None
    return approval.status


def until(events: Iterator[Sse], kind: str, approval_id: str | None = None) -> Sse:
    """The next event of ``kind`` (about ``approval_id`` when given)."""
    for event in events:
        if event.event != kind:
            continue
        if approval_id is None or event.json()["approval"]["id"] == approval_id:
            return event
    raise AssertionError(f"the stream ended before a {kind} event")


def decide(
    console: Console, client: httpx.Client, approval_id: str, decision: str, **fields: str
) -> httpx.Response:
    """A form post of a request's page, with the session's CSRF token."""
    data = {"csrf": console.csrf(client, "/approvals"), **fields}
    return client.post(f"/approvals/{approval_id}/{decision}", data=data)


# ---- the live stream ------------------------------------------------------------------------
def test_the_inbox_stream_is_refused_without_a_session(console: Console) -> None:
    with console.http() as anonymous:
        none = anonymous.get("/approvals/events", headers=SSE)
    with console.http(cookies={"ongrid_session": "x" * 43}) as forged:
        unknown = forged.get("/approvals/events", headers=SSE)
    assert none.status_code == 401  # a stream is refused, not sent to the login page
    assert "text/event-stream" not in none.headers["content-type"]
    # A cookie that opens no session: the reconnect of a live part whose session ended is told
    # why in the stream's own words (EventSource reads no status), and gets nothing else.
    assert unknown.status_code == 200
    assert unknown.text.startswith("event: error") and '"unauthorized"' in unknown.text
    assert unknown.text.count("event:") == 1


def test_the_inbox_stream_sends_each_change_with_the_card_rendered_for_the_session(
    console: Console,
) -> None:
    with (
        console.logged_in("oscar") as client,
        client.stream("GET", "/approvals/events", headers=SSE, timeout=30) as response,
    ):
        assert response.status_code == 200
        assert "default-src 'self'" in response.headers["content-security-policy"]
        events = read_sse(response)
        until(events, "ready")
        asked = request_restart(console, "olga", {"service": "cache-a"})
        requested = until(events, "requested", asked["approval_id"])
        body = requested.json()
        assert body["approval"]["requested_by"] == "olga"
        assert body["approval"]["args"] == {"service": "cache-a"}
        assert f'data-id="{asked["approval_id"]}"' in body["html"]
        assert ">Approve</button>" in body["html"]  # oscar may sign olga's mutating call
        assert "cache-a" in body["html"]
        with console.logged_in("admin") as other:
            assert decide(console, other, asked["approval_id"], "approve").status_code == 303
        approved = until(events, "approved", asked["approval_id"]).json()
    assert approved["approval"]["status"] == "approved"
    assert 'data-status="approved"' in approved["html"]
    assert ">Approve</button>" not in approved["html"]
    assert "See the execution" in approved["html"]


def test_the_requesters_own_stream_offers_no_approve_button(console: Console) -> None:
    with (
        console.logged_in("olga") as client,
        client.stream("GET", "/approvals/events", headers=SSE, timeout=30) as response,
    ):
        events = read_sse(response)
        until(events, "ready")
        asked = request_restart(console, "olga")
        html = until(events, "requested", asked["approval_id"]).json()["html"]
    assert ">Approve</button>" not in html
    assert "nobody approves their own request" in html


def test_a_stream_for_one_request_sends_only_its_changes(console: Console) -> None:
    mine = request_restart(console)
    with (
        console.logged_in("vera") as client,
        client.stream(
            "GET", f"/approvals/events?only={mine['approval_id']}", headers=SSE, timeout=30
        ) as response,
    ):
        events = read_sse(response)
        first = until(events, "requested")
        assert first.json()["approval"]["id"] == mine["approval_id"]
        until(events, "ready")
        request_restart(console)  # another request: not on this page
        with console.logged_in("oscar") as signer:
            decide(console, signer, mine["approval_id"], "reject", comment="no")
        rejected = until(events, "rejected")
    assert rejected.json()["approval"]["id"] == mine["approval_id"]


def test_the_stream_ends_once_its_session_is_logged_out(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(approvals, "CHECK_SECONDS", 0.05)
    with console.logged_in("vera") as client:
        csrf = console.csrf(client, "/approvals")
        with client.stream("GET", "/approvals/events", headers=SSE, timeout=30) as response:
            events = read_sse(response)
            until(events, "ready")
            assert client.post("/logout", data={"csrf": csrf}).status_code == 303
            rest = [e.event for e in events]
    assert rest[-1] == "end"


def test_an_idle_stream_sends_heartbeats(console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approvals, "HEARTBEAT_SECONDS", 0.05)
    with (
        console.logged_in("vera") as client,
        client.stream("GET", "/approvals/events", headers=SSE, timeout=30) as response,
    ):
        events = read_sse(response, comments=True)
        for event in events:
            if event.comment is not None:
                break
        else:
            raise AssertionError("the stream ended without a heartbeat")
    assert event.comment is not None


def test_a_request_that_expires_is_told_to_the_stream_without_waiting_for_the_sweep(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(approvals, "CHECK_SECONDS", 0.05)
    asked = request_restart(console)
    with (
        console.logged_in("vera") as client,
        client.stream("GET", "/approvals/events", headers=SSE, timeout=30) as response,
    ):
        events = read_sse(response)
        until(events, "ready")
        with console.store.tx() as conn:  # its time is up (as if an hour went by)
            conn.execute(
                text("UPDATE approvals SET expires_at = 0 WHERE id = :id"),
                {"id": asked["approval_id"]},
            )
        expired = until(events, "expired", asked["approval_id"]).json()
    assert expired["approval"]["status"] == "expired"
    assert "time-left" not in expired["html"]  # no countdown on a closed request
    assert approval_status(console, asked["approval_id"]) == "expired"


# ---- the inbox and a request's page ---------------------------------------------------------
def test_the_inbox_shows_exactly_what_will_run(console: Console) -> None:
    args = {"service": "cache-<b>", "hosts": ["a", "b"], "note": "é ✓"}
    asked = request_restart(console, "olga", args)
    approval = console.store.approvals.get(asked["approval_id"])
    assert approval is not None
    with console.logged_in("vera") as client:
        page = client.get("/approvals").text
        own = client.get(f"/approvals/{asked['approval_id']}").text
    for html in (page, own):
        card = html[html.index(f'id="approval-{asked["approval_id"]}"') :]
        assert "restart_cache" in card
        assert approval.definition_hash in card
        assert "responder" in card
        assert "olga" in card
        # The frozen args, pretty and escaped: what the desk will run.
        assert "&#34;service&#34;: &#34;cache-&lt;b&gt;&#34;" in card
        assert "é ✓" in card
        assert "0 of 1 required" in card
        assert f'data-expires="{approval.expires_at}"' in card
        assert f"/executions/{asked['id']}" in card
        assert "role viewer may not sign approvals" in card
        assert ">Approve</button>" not in card


def test_the_request_page_is_where_the_webhooks_link_to(console: Console) -> None:
    asked = request_restart(console)
    with console.http() as anonymous:
        away = anonymous.get(f"/approvals/{asked['approval_id']}")
    assert away.status_code == 303
    assert away.headers["location"] == f"/login?next=/approvals/{asked['approval_id']}"


# ---- deciding -------------------------------------------------------------------------------
def test_approving_and_rejecting_need_the_sessions_csrf_token(console: Console) -> None:
    asked = request_restart(console)
    url = f"/approvals/{asked['approval_id']}"
    with console.logged_in("oscar") as client, console.logged_in("admin2") as other:
        stolen = console.csrf(other, "/approvals")
        answers = [
            client.post(url + "/approve", data={"comment": "ok"}),
            client.post(url + "/approve", data={"csrf": stolen}),
            client.post(url + "/reject", data={"csrf": "0" * 64}),
            client.post(
                url + "/approve",
                data={"csrf": console.csrf(client, url)},
                headers={"origin": "http://evil.example"},
            ),
        ]
    assert [a.status_code for a in answers] == [403, 403, 403, 403]
    assert approval_status(console, asked["approval_id"]) == "pending"


def test_a_forged_approval_of_ones_own_request_is_refused_by_the_desk(console: Console) -> None:
    asked = request_restart(console, "olga")
    with console.logged_in("olga") as client:
        page = client.get(f"/approvals/{asked['approval_id']}").text
        forged = decide(console, client, asked["approval_id"], "approve", comment="trust me")
    assert ">Approve</button>" not in page
    assert forged.status_code == 403
    assert "nobody approves their own request" in forged.text
    assert approval_status(console, asked["approval_id"]) == "pending"
    signed = console.store.audit.entries(subject=asked["approval_id"], action="approval.signed")
    assert signed == []


def test_a_viewer_can_neither_approve_nor_reject(console: Console) -> None:
    asked = request_restart(console)
    with console.logged_in("vera") as client:
        answers = [decide(console, client, asked["approval_id"], d) for d in ("approve", "reject")]
    assert [a.status_code for a in answers] == [403, 403]
    assert approval_status(console, asked["approval_id"]) == "pending"


def test_a_rejection_with_a_comment_ends_the_request_and_is_shown(console: Console) -> None:
    asked = request_restart(console)
    with console.logged_in("oscar") as client:
        answer = decide(
            console, client, asked["approval_id"], "reject", comment="  Not during the freeze.  "
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == f"/approvals/{asked['approval_id']}?done=rejected"
        page = client.get(answer.headers["location"]).text
    assert "Rejected: the call will not run." in page
    assert "Not during the freeze." in page
    assert 'data-status="rejected"' in page
    approval = console.store.approvals.get(asked["approval_id"])
    assert approval is not None
    assert [(s.principal, s.decision, s.comment) for s in approval.signatures] == [
        ("oscar", "reject", "Not during the freeze.")
    ]
    assert console.manager.get(asked["id"]).status.value == "rejected"


def test_a_signature_from_the_inbox_goes_back_to_the_inbox(console: Console) -> None:
    asked = request_restart(console)
    with console.logged_in("oscar") as client:
        answer = decide(console, client, asked["approval_id"], "approve", next="inbox", comment="")
    assert answer.status_code == 303
    assert answer.headers["location"] == (
        f"/approvals?done=approved#approval-{asked['approval_id']}"
    )
    approval = console.store.approvals.get(asked["approval_id"])
    assert approval is not None
    assert approval.status == "approved"
    assert approval.signatures[0].comment is None  # a blank comment is no comment


def test_a_comment_over_the_limit_is_refused_and_nothing_is_signed(console: Console) -> None:
    asked = request_restart(console)
    with console.logged_in("oscar") as client:
        long = decide(console, client, asked["approval_id"], "approve", comment="x" * 2001)
    assert long.status_code == 400
    assert "over 2000 characters" in long.text
    assert approval_status(console, asked["approval_id"]) == "pending"


def test_a_request_that_is_no_longer_pending_cannot_be_decided_again(console: Console) -> None:
    asked = request_restart(console)
    with console.logged_in("oscar") as client, console.logged_in("admin") as admin:
        assert decide(console, client, asked["approval_id"], "reject").status_code == 303
        late = decide(console, admin, asked["approval_id"], "approve")
        page = admin.get(f"/approvals/{asked['approval_id']}").text
    assert late.status_code == 409
    assert "is rejected, not pending" in late.text
    assert "<form" not in page[page.index('class="card') :]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/approvals/0123456789abcdef0123456789abcdef", 404),
        ("GET", "/approvals/%2e%2e%2fskills", 404),
        ("GET", "/approvals/" + "a" * 65, 400),
        ("GET", "/approvals/<script>/card", 404),
        ("GET", "/approvals/0123/card?back=elsewhere", 400),
        ("GET", "/approvals?status=sleeping", 400),
        ("GET", "/approvals?status=" + "p" * 21, 400),
        ("GET", "/approvals/events?only=" + "a" * 65, 400),
        ("POST", "/approvals/0123456789abcdef0123456789abcdef/approve", 404),
        ("POST", "/approvals/nope/reject", 404),
    ],
)
def test_bad_ids_and_parameters_get_a_clear_error_page(
    console: Console, method: str, path: str, status: int
) -> None:
    with console.logged_in("oscar") as client:
        data = {"csrf": console.csrf(client, "/approvals")} if method == "POST" else None
        answer = client.request(method, path, data=data, headers=SSE if "events" in path else {})
    assert answer.status_code == status
    assert "text/html" in answer.headers["content-type"]
    assert "<script>" not in answer.text


def test_a_notice_comes_only_from_the_known_outcomes(console: Console) -> None:
    with console.logged_in("vera") as client:
        page = client.get("/approvals?done=%3Cscript%3Ealert(1)%3C/script%3E").text
    assert "<script>alert" not in page
    assert not re.search(r'class="notice"', page)
