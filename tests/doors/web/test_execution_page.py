"""An execution's page over plain HTTP: its facts, its timeline so far and where the live part
goes on from, the verbatim result and its download, the error envelope, the cancel rule of
REST, and the event stream's session check."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.types import Role
from tests.support.browser import Console, console_server, csrf_of, login_http
from tests.support.run_skills import STEPPED_RESULT, add_run_skills
from tests.support.sse import read_sse
from tests.support.waiting import wait_for

SSE = {"accept": "text/event-stream"}


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("console")) as served:
        add_run_skills(served)
        yield served


def start(console: Console, skill: str, args: dict[str, Any], who: str = "olga") -> str:
    response = console.rest(
        "POST", f"/v1/skills/{skill}/execute", who, json={"args": args, "wait": False}
    )
    assert response.status_code in (200, 202), response.text
    execution_id: str = response.json()["id"]
    return execution_id


def status(console: Console, execution_id: str) -> str:
    body: dict[str, Any] = console.rest("GET", f"/v1/executions/{execution_id}").json()
    return str(body["status"])


def ended(console: Console, execution_id: str) -> str:
    return wait_for(
        lambda: (s := status(console, execution_id)) not in ("running", "pending_approval") and s,
        "the execution to end",
    )


def timeline_lines(page: str) -> list[tuple[str, str, str]]:
    """(time, type, text) of each event the page lists."""
    return [
        (time, kind, html.unescape(text))
        for time, kind, text in re.findall(
            r'<li class="event [^"]*" data-seq="\d+"><time datetime="[^"]*">([^<]*)</time> '
            r'<span class="event-type">([^<]*)</span> <span class="event-text">([^<]*)</span>',
            page,
        )
    ]


def test_a_finished_call_shows_its_result_verbatim_and_pretty(
    console: Console, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    Path(f"{gate}.2").touch()
    execution_id = start(console, "stepped_check", {"gate": str(gate)})
    assert ended(console, execution_id) == "succeeded"
    with console.logged_in("vera") as client:
        page = client.get(f"/executions/{execution_id}")
        download = client.get(f"/executions/{execution_id}/result")
    assert page.status_code == 200
    text = page.text
    assert 'data-part="execution-live"' not in text  # nothing left to follow
    raw = re.search(
        r'<pre class="code result-raw" id="result-raw" tabindex="0">([^<]*)</pre>', text
    )
    assert raw and html.unescape(raw.group(1)) == STEPPED_RESULT
    assert "&lt;b&gt;fine&lt;/b&gt;" in text and "<b>fine" not in text
    assert "&#34;disks&#34;: &#34;ok&#34;,\n  &#34;network&#34;" in text  # re-indented
    assert "<dt>Requested by</dt><dd>olga</dd>" in text
    assert re.search(r"<dt>Duration</dt><dd class=\"duration\">\d+ ms</dd>", text)
    lines = timeline_lines(text)
    assert [(kind, words) for _time, kind, words in lines] == [
        ("status", "running"),
        ("stderr", "checking the disks"),
        ("progress", "1 / 3 disks checked"),
        ("stderr", "checking the network"),
        ("progress", "2 / 3 network checked"),
        ("progress", "3 / 3"),
        ("status", "succeeded"),
    ]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", time) for time, _kind, _text in lines)
    assert '<progress id="progress" max="3" value="3">' in text
    assert download.status_code == 200
    assert download.content == STEPPED_RESULT.encode()
    assert download.headers["content-disposition"] == f'attachment; filename="{execution_id}.json"'


def test_a_failed_call_shows_its_error_envelope(console: Console) -> None:
    execution_id = start(console, "failing_check", {})
    assert ended(console, execution_id) == "failed"
    with console.logged_in("olga") as client:
        text = client.get(f"/executions/{execution_id}").text
        no_result = client.get(f"/executions/{execution_id}/result")
    envelope = re.search(r'<pre class="code envelope" tabindex="0">([^<]*)</pre>', text)
    assert envelope
    parsed = json.loads(html.unescape(envelope.group(1)))
    assert parsed["error"]["code"] == "exit_status"
    assert parsed["exit_code"] == 3
    assert "the disk is <on fire>" in parsed["stderr_tail"]
    assert "<on fire>" not in text
    assert "<dt>Exit code</dt><dd>3</dd>" in text
    assert no_result.status_code == 404


def test_a_running_call_lists_its_events_so_far_and_follows_after_them(
    console: Console, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    execution_id = start(console, "stepped_check", {"gate": str(gate)})
    stream = f"/executions/{execution_id}/events"
    with console.logged_in("vera") as client:

        def listed() -> str | None:
            page = client.get(f"/executions/{execution_id}").text
            return page if len(timeline_lines(page)) == 3 else None  # status, stderr, progress

        page = wait_for(listed, "the first step's events on the page")
        assert f'data-events="{stream}?after=3"' in page
        assert '<progress id="progress" max="3" value="1">' in page
        assert re.search(r"<dt>Started</dt><dd><time datetime=\"[^\"]+Z\">", page)
        gate.touch()
        Path(f"{gate}.2").touch()
        with client.stream("GET", f"{stream}?after=3", headers=SSE, timeout=30) as response:
            rest = list(read_sse(response))
        with client.stream(
            "GET", f"{stream}?after=3", headers={**SSE, "last-event-id": "5"}, timeout=30
        ) as response:
            resumed = list(read_sse(response))
        bad = client.get(f"{stream}?after=-1", headers=SSE)
    assert [e.id for e in rest[:-1]] == ["4", "5", "6", "7"]
    assert rest[-1].event == "end" and rest[-1].json()["status"] == "succeeded"
    assert [e.id for e in resumed[:-1]] == ["6", "7"]  # the larger of the two
    assert bad.status_code == 400


def test_the_event_stream_checks_the_session_when_it_opens(console: Console) -> None:
    execution_id = start(console, "failing_check", {})
    stream = f"/executions/{execution_id}/events"
    token, info = console.store.tokens.create("stella", Role.VIEWER)
    with console.http() as client:
        assert login_http(client, token).status_code == 303
        assert client.get(stream, headers=SSE).status_code == 200
        console.store.tokens.revoke(info.id)
        revoked = client.get(stream, headers=SSE)
    with console.logged_in("vera") as client:
        client.post("/logout", data={"csrf": csrf_of(client.get("/skills").text)})
        logged_out = client.get(stream, headers=SSE)
    with console.http() as anonymous:
        nobody = anonymous.get(stream, headers=SSE)
    assert nobody.status_code == 401  # no session at all: refused
    assert "text/event-stream" not in nobody.headers["content-type"]
    for refused in (revoked, logged_out):  # an ended session's cookie: told why, nothing else
        if refused.status_code == 401:  # the cookie was cleared (logout)
            continue
        assert refused.status_code == 200
        assert refused.text.startswith("event: error") and '"unauthorized"' in refused.text
        assert refused.text.count("event:") == 1


def cancel(client: httpx.Client, execution_id: str, csrf: str | None) -> httpx.Response:
    data = {"csrf": csrf} if csrf is not None else {}
    return client.post(f"/executions/{execution_id}/cancel", data=data)


def test_cancel_follows_the_rest_rule_and_needs_the_csrf_token(
    console: Console, tmp_path: Path
) -> None:
    execution_id = start(console, "gated_wait", {"gate": str(tmp_path / "never")}, who="oscar")
    page_url = f"/executions/{execution_id}"
    with console.logged_in("vera") as viewer:
        page = viewer.get(page_url).text
        assert "Cancel this call" not in page  # neither the requester nor a signer
        refused = cancel(viewer, execution_id, csrf_of(page))
    with console.logged_in("olga") as operator:
        page = operator.get(page_url).text
        assert "Cancel this call" in page
        forged = cancel(operator, execution_id, None)
        assert status(console, execution_id) == "running"
        done = cancel(operator, execution_id, csrf_of(page))
        after = operator.get(page_url).text
        again = cancel(operator, execution_id, csrf_of(page))
    assert refused.status_code == 403
    assert "only the requester or an operator may cancel" in refused.text
    assert forged.status_code == 403
    assert done.status_code == 303 and done.headers["location"] == page_url
    assert status(console, execution_id) == "cancelled"
    assert "Cancel this call" not in after
    assert "<code>cancelled</code>" in after
    assert again.status_code == 409


def test_a_call_waiting_for_approval_links_to_its_request(console: Console) -> None:
    execution_id = start(console, "wipe_scratch", {})
    approval_id = console.rest("GET", f"/v1/executions/{execution_id}").json()["approval_id"]
    with console.logged_in("oscar") as client:
        page = client.get(f"/executions/{execution_id}").text
    assert f'<a href="/approvals/{approval_id}">request {approval_id[:12]}</a>' in page
    assert "pending, 0 of 2 signatures" in page
    assert "Waiting for approval" in page
    assert "Cancel the request" in page  # oscar may sign, so he may cancel
    assert 'data-part="execution-live"' in page


def test_an_unknown_execution_is_a_404_page(console: Console) -> None:
    with console.logged_in("vera") as client:
        response = client.get("/executions/nope")
    assert response.status_code == 404
    assert "unknown execution" in response.text
