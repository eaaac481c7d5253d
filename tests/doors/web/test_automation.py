"""The console's triggers-and-schedules page over plain HTTP against the served console:
operators read it, viewers are refused, admins pause, resume and run schedules through forms
that go through the same calls (and audit) as the REST routes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import Console, console_server
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("automation")) as served:
        yield served


def test_the_page_lists_triggers_and_schedules_for_operators_and_refuses_viewers(
    console: Console,
) -> None:
    rule = {"name": "disk", "match": {"alertname": "DiskFull"}, "skill": "host_info", "args": {}}
    assert console.rest("PUT", "/v1/triggers/am", json={"rules": [rule]}).status_code == 201
    doc = {"cron": "0 7 * * *", "timezone": "Europe/Paris", "skill": "host_info"}
    assert console.rest("PUT", "/v1/schedules/morning", json=doc).status_code == 201
    with console.logged_in("olga") as client:
        page = client.get("/automation")
        assert page.status_code == 200, page.text
        assert "POST /v1/triggers/am" in page.text and "<code>disk</code>" in page.text
        assert "0 7 * * *" in page.text and "Europe/Paris" in page.text
        assert "Run now" not in page.text  # operators read; admins act
    with console.logged_in("vera") as client:
        assert client.get("/automation").status_code == 403
        assert 'href="/automation"' not in client.get("/skills").text


def test_admins_pause_resume_and_run_a_schedule_from_the_page(console: Console) -> None:
    doc = {"cron": "0 6 * * *", "skill": "host_info"}
    assert console.rest("PUT", "/v1/schedules/early", json=doc).status_code == 201
    with console.logged_in("admin") as client:
        csrf = console.csrf(client, "/automation")
        paused = client.post("/automation/schedules/early/pause", data={"csrf": csrf})
        assert paused.status_code == 303, paused.text
        assert console.rest("GET", "/v1/schedules/early").json()["paused"] is True
        assert "Resume" in client.get("/automation").text
        assert (
            client.post("/automation/schedules/early/run", data={"csrf": csrf}).status_code == 303
        )
        client.post("/automation/schedules/early/resume", data={"csrf": csrf})
        forged = client.post("/automation/schedules/early/pause", data={"csrf": "forged"})
        assert forged.status_code == 403
    body = console.rest("GET", "/v1/schedules/early").json()
    assert body["paused"] is False
    firing = wait_for(lambda: body["recent"] or None, "the manual firing")[0]
    assert firing["how"] == "manual" and firing["kind"] == "call"
    audit = console.rest("GET", "/v1/audit", params={"subject": "early"}).json()["items"]
    assert {"schedule.paused", "schedule.resumed", "schedule.run_now"} <= {
        e["action"] for e in audit
    }
