"""History pages over plain HTTP: executions filtered and paged with the REST cursor, the audit
log paged and filtered with its "Verify chain" post, and personas with what each is offered
(the same lists as the REST views)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from ongrid_skills.doors.web import history
from tests.support.browser import Console
from tests.support.waiting import wait_for

ROW_ID = re.compile(r'<a href="/executions/([0-9a-f]{32})">')
NEXT = re.compile(r'<a rel="next" href="([^"]+)">')


def run(console: Console, skill: str, who: str, wait: bool = True, **args: Any) -> str:
    body = {"args": args, "wait": wait}
    response = console.rest("POST", f"/v1/skills/{skill}/execute", who, json=body)
    assert response.status_code in (200, 202), response.text
    execution_id: str = response.json()["id"]
    return execution_id


def listed(page: str) -> list[str]:
    return ROW_ID.findall(page)


def next_link(page: str) -> str | None:
    found = NEXT.search(page)
    return html.unescape(found.group(1)) if found else None


def walk(client: httpx.Client, url: str) -> tuple[list[str], int]:
    """Every row from ``url`` on, following "Older" to the end: (ids, pages)."""
    seen: list[str] = []
    pages = 0
    next_url: str | None = url
    while next_url is not None:
        answer = client.get(next_url)
        assert answer.status_code == 200, answer.text
        seen += listed(answer.text)
        pages += 1
        assert pages < 20
        next_url = next_link(answer.text)
    return seen, pages


# ---- executions -----------------------------------------------------------------------------
def test_executions_are_paged_newest_first_with_the_rest_cursor(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "EXECUTIONS_PAGE", 3)
    made = [run(console, "odd_text", "oscar") for _ in range(7)]
    with console.logged_in("vera") as client:
        seen, pages = walk(client, "/executions?skill=odd_text&requested_by=oscar")
        first = client.get("/executions?skill=odd_text&requested_by=oscar").text
    assert seen == list(reversed(made))
    assert pages == 3
    rest = console.rest(
        "GET", "/v1/executions", params={"skill": "odd_text", "requested_by": "oscar", "limit": 3}
    ).json()
    assert next_link(first) == (
        "/executions?skill=odd_text&requested_by=oscar&cursor=" + rest["next_cursor"]
    )


def test_executions_are_filtered_by_skill_status_and_requester(console: Console) -> None:
    olgas = run(console, "host_info", "olga")
    oscars = run(console, "host_info", "oscar")
    with console.logged_in("vera") as client:
        by_olga = listed(client.get("/executions?requested_by=olga&skill=host_info").text)
        by_skill = listed(client.get("/executions?skill=host_info").text)
        succeeded = listed(client.get("/executions?status=succeeded&skill=host_info").text)
        failed = listed(client.get("/executions?status=failed&skill=host_info").text)
        nobody = client.get("/executions?requested_by=nobody").text
    assert olgas in by_olga
    assert oscars not in by_olga
    assert {olgas, oscars} <= set(by_skill)
    assert {olgas, oscars} <= set(succeeded)
    assert failed == []
    assert "No execution matches." in nobody


def test_only_the_first_running_calls_of_a_page_are_followed_live(
    console: Console, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    running = [run(console, "gated_wait", "olga", gate=str(gate), wait=False) for _ in range(5)]
    try:
        with console.logged_in("vera") as client:
            page = client.get("/executions?skill=gated_wait&status=running").text
    finally:
        gate.touch()
    followed = re.findall(r'data-events="/executions/([0-9a-f]{32})/events"', page)
    assert listed(page) == list(reversed(running))
    assert followed == list(reversed(running))[: history.LIVE_ROWS]
    for execution_id in running:
        wait_for(lambda i=execution_id: console.manager.get(i).status.final, "the call to end")


@pytest.mark.parametrize(
    "query",
    [
        "cursor=!!!not-base64!!!",
        "cursor=bnVsbA",  # base64 of "null"
        "cursor=WyJhIl0",  # base64 of ["a"]
        "cursor=" + "A" * 301,
        "status=sleeping",
        "skill=" + "s" * 201,
    ],
)
def test_bad_execution_queries_get_a_400_page(console: Console, query: str) -> None:
    with console.logged_in("vera") as client:
        answer = client.get("/executions?" + query)
    assert answer.status_code == 400
    assert "text/html" in answer.headers["content-type"]


# ---- audit ----------------------------------------------------------------------------------
AUDIT_ROW = re.compile(r'<tr id="entry-(\d+)">')


def test_the_audit_log_is_paged_and_filtered_by_action(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "AUDIT_PAGE", 4)
    for _ in range(5):
        run(console, "odd_text", "olga")
    started = [
        e["seq"] for e in console.store.audit.entries(limit=1000, action="execution.started")
    ]
    with console.logged_in("vera") as client:
        seqs: list[int] = []
        url: str | None = "/audit?action=execution.started"
        while url is not None:
            page = client.get(url).text
            seqs += [int(s) for s in AUDIT_ROW.findall(page)]
            url = next_link(page)
        everything = client.get("/audit").text
    assert seqs == started  # every one, newest first, none twice
    assert len(AUDIT_ROW.findall(everything)) == 4
    assert "Older" in everything


def test_verifying_the_chain_is_a_checked_post_that_says_intact_or_where_it_breaks(
    console: Console,
) -> None:
    run(console, "odd_text", "olga")
    with console.logged_in("vera") as client:
        refused = client.post("/audit/verify", data={})
        intact = client.post("/audit/verify", data={"csrf": console.csrf(client, "/audit")})
        newest = console.store.audit.entries(limit=1)[0]["seq"]
        target = newest - 1
        with console.store.tx() as conn:
            original = conn.execute(
                text("SELECT actor FROM audit_entries WHERE seq = :s"), {"s": target}
            ).scalar_one()
            conn.execute(
                text("UPDATE audit_entries SET actor = 'mallory' WHERE seq = :s"), {"s": target}
            )
        try:
            broken = client.post("/audit/verify", data={"csrf": console.csrf(client, "/audit")})
        finally:
            with console.store.tx() as conn:
                conn.execute(
                    text("UPDATE audit_entries SET actor = :a WHERE seq = :s"),
                    {"a": original, "s": target},
                )
    assert refused.status_code == 403
    assert intact.status_code == 200
    assert "Chain intact:" in intact.text
    assert broken.status_code == 200
    assert f"Chain broken</strong> at entry {target}" in broken.text
    assert console.store.audit.verify().ok  # put back as it was


def test_bad_audit_queries_get_a_400_page(console: Console) -> None:
    with console.logged_in("vera") as client:
        answers = [
            client.get("/audit?before=0"),
            client.get("/audit?before=x"),
            client.get("/audit?before=" + "9" * 30),
            client.get("/audit?action=" + "a" * 201),
        ]
    assert [a.status_code for a in answers] == [400, 400, 400, 400]


# ---- personas -------------------------------------------------------------------------------
def test_personas_are_listed_with_their_mode(console: Console) -> None:
    with console.logged_in("vera") as client:
        page = client.get("/personas").text
    for name, mode in [("reader", "read-only"), ("responder", "mutating-with-confirm")]:
        row = page[page.index(f'<a href="/personas/{name}">') :]
        assert mode in row[: row.index("</tr>")]


def test_a_personas_page_shows_what_the_rest_api_says_it_is_offered(console: Console) -> None:
    rest = console.rest("GET", "/v1/personas/reader", "vera").json()
    with console.logged_in("vera") as client:
        page = client.get("/personas/reader").text
    offered = re.findall(r'<li><a href="/skills/[^"]+"><code>([^<]+)</code>', page)
    assert offered == rest["offered"]
    assert html.escape(rest["prompt"]) in page


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_the_tools_view_is_the_rest_tools_view(console: Console, fmt: str) -> None:
    params = {"format": fmt, "message": "check a port"}
    rest = console.rest("GET", "/v1/personas/responder/tools", "vera", params=params).json()
    with console.logged_in("vera") as client:
        page = client.get("/personas/responder", params=params).text
    shown = re.search(r'<pre class="code tools" tabindex="0">(.*?)</pre>', page, re.S)
    assert shown is not None
    assert json.loads(html.unescape(shown.group(1))) == rest


def test_bad_persona_queries_get_clear_pages(console: Console) -> None:
    with console.logged_in("vera") as client:
        unknown = client.get("/personas/nobody")
        bad_format = client.get("/personas/reader?format=yaml")
        long_message = client.get("/personas/reader?message=" + "m" * 4001)
    assert unknown.status_code == 404
    assert bad_format.status_code == 400
    assert long_message.status_code == 400
