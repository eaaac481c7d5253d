"""A console stream ends with its session: when the session's token is revoked, when it is
logged out, when it expires. The stream gets a last ``error`` event and closes; the next
request is refused. (The inbox and hosts streams say ``end`` when their own check sees it
first: see test_approvals and test_hosts.)"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from sqlalchemy import update

from ongrid_skills.doors.stream_guard import RECHECK_SECONDS, TICK_SECONDS
from ongrid_skills.store.models import WebSessionRow
from ongrid_skills.store.sessions import hash_session_id
from ongrid_skills.types import Role
from tests.support.browser import Console
from tests.support.sse import StreamWatch

SSE = {"accept": "text/event-stream"}
#: How long after its session ended a stream may go on (the bound the docs give) …
BOUND = RECHECK_SECONDS + TICK_SECONDS
#: … and what a loaded test machine adds to it.
SLACK = 3.0


@contextmanager
def watching_a_call(
    console: Console, tmp_path: Path, who: str
) -> Iterator[tuple[httpx.Client, StreamWatch, str]]:
    """``who`` logged in, following a running call's live stream (the call ends afterwards)."""
    gate = tmp_path / "gate"
    started = console.rest(
        "POST",
        "/v1/skills/gated_wait/execute",
        "olga",
        json={"args": {"gate": str(gate)}, "wait": False},
    )
    assert started.status_code == 202, started.text
    execution_id = started.json()["id"]
    try:
        with console.logged_in(who) as client:
            watch = StreamWatch(client, f"/executions/{execution_id}/events", headers=SSE)
            watch.start()
            watch.wait_event("stderr")
            yield client, watch, execution_id
    finally:
        gate.touch()


def assert_ended(watch: StreamWatch, since: float) -> None:
    assert watch.closed.wait(BOUND + SLACK), (
        f"the stream was still open {BOUND + SLACK} s after its session ended: {watch.kinds()}"
    )
    assert watch.failure is None, watch.failure
    assert watch.closed_at is not None and watch.closed_at - since <= BOUND + SLACK
    last = watch.events[-1][1]
    assert last.event == "error", watch.kinds()
    assert last.json()["error"]["code"] == "unauthorized"
    assert "session has ended" in last.json()["error"]["message"]
    assert "end" not in watch.kinds()  # the call goes on: only the stream ended


def new_user(console: Console, name: str) -> str:
    token, info = console.store.tokens.create(name, Role.VIEWER)
    console.tokens[name] = token
    return info.id


def ends_with(
    console: Console, tmp_path: Path, who: str, act: Callable[[httpx.Client], None]
) -> None:
    with watching_a_call(console, tmp_path, who) as (client, watch, execution_id):
        acted_at = time.monotonic()
        act(client)
        assert_ended(watch, acted_at)
        refused = client.get(f"/executions/{execution_id}/events", headers=SSE)
        page = client.get(f"/executions/{execution_id}")
    # The next stream request gets nothing of the call: a browser that still sends the ended
    # session's cookie is told why in the stream's own words (EventSource shows no status),
    # one that no longer holds a session (logged out) is refused; a page asks for a login.
    if refused.status_code == 200:
        assert refused.text.startswith("event: error"), refused.text
        assert '"unauthorized"' in refused.text and "stderr" not in refused.text
    else:
        assert refused.status_code == 401
    assert page.status_code in (303, 401)


def test_revoking_the_token_ends_the_console_stream_of_its_session(
    console: Console, tmp_path: Path
) -> None:
    token_id = new_user(console, "rita-console")
    ends_with(console, tmp_path, "rita-console", lambda _c: console.store.tokens.revoke(token_id))


def test_logging_out_ends_the_console_stream_of_the_session(
    console: Console, tmp_path: Path
) -> None:
    new_user(console, "lena-console")

    def log_out(client: httpx.Client) -> None:
        csrf = console.csrf(client)
        assert client.post("/logout", data={"csrf": csrf}).status_code == 303

    ends_with(console, tmp_path, "lena-console", log_out)


def test_a_session_that_expires_ends_its_console_stream(console: Console, tmp_path: Path) -> None:
    new_user(console, "enzo-console")

    def expire(client: httpx.Client) -> None:
        table = WebSessionRow.__table__
        id_hash = hash_session_id(client.cookies["ongrid_session"])
        with console.store.tx() as conn:
            conn.execute(
                update(table).where(table.c.id_hash == id_hash).values(expires_at=time.time())
            )

    ends_with(console, tmp_path, "enzo-console", expire)
