"""Running a skill from the console over plain HTTP: the generated form, posted fields typed into
args (hostile ones refused clearly), the server's violations on their fields, the confirmation
step, approval requests, the CSRF and role rules of REST, and nothing run by a refused post."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.support.browser import Console, console_server, csrf_of
from tests.support.run_skills import add_run_skills
from tests.support.waiting import wait_for

FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("console")) as served:
        add_run_skills(served)
        yield served


def executions(console: Console, skill: str) -> list[Any]:
    items, _cursor = console.store.executions.page(skill=skill, limit=500)
    return items


def post_run(
    client: httpx.Client, skill: str, fields: list[tuple[str, str]] | dict[str, str]
) -> httpx.Response:
    """The run form of ``skill`` posted with ``fields`` (and the page's own CSRF token)."""
    csrf = csrf_of(client.get(f"/skills/{skill}/run").text)
    pairs = list(fields.items()) if isinstance(fields, dict) else list(fields)
    return post_form(client, f"/skills/{skill}/run", [("csrf", csrf), *pairs])


def post_form(client: httpx.Client, path: str, pairs: list[tuple[str, str]]) -> httpx.Response:
    """A form post whose fields may repeat (as a browser sends the rows of an array)."""
    body = urlencode(pairs)
    return client.post(path, content=body, headers={"content-type": FORM})


def finished(console: Console, location: str) -> dict[str, Any]:
    execution_id = location.rsplit("/", 1)[1]

    def done() -> dict[str, Any] | None:
        body: dict[str, Any] = console.rest("GET", f"/v1/executions/{execution_id}").json()
        return body if body["status"] not in ("running", "pending_approval") else None

    return wait_for(done, "the execution to end")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def ran(console: Console) -> int:
    """How many form_echo calls got as far as running."""
    return len([e for e in executions(console, "form_echo") if e.status.value == "succeeded"])


def field_errors(html: str) -> dict[str, list[str]]:
    """The error messages next to each field, by the field's name."""
    found: dict[str, list[str]] = {}
    for block in re.findall(
        r'<(?:div|fieldset) class="arg[^"]*has-error".*?</(?:div|fieldset)>', html, re.S
    ):
        name = re.search(r'name="(a/[^"]+)"', block)
        messages = re.findall(r'<p class="field-error"[^>]*>([^<]*)</p>', block)
        if name:
            found[name.group(1)] = [m.replace("&#39;", "'") for m in messages]
    return found


def test_the_run_form_has_a_field_per_property_and_sends_only_what_was_filled(
    console: Console,
) -> None:
    with console.logged_in("olga") as client:
        page = client.get("/skills/form_echo/run")
        assert page.status_code == 200
        html = page.text
        for name in ("a/host", "a/retries", "a/level", "a/verbose", "a/tags", "a/limits/cpu"):
            assert f'name="{name}"' in html
        assert 'type="email"' in html and 'min="0" max="10" step="1"' in html
        assert "the skill's default: low" in html
        response = post_run(client, "form_echo", {"a/host": "db1", "a/retries": "", "a/level": ""})
    assert response.status_code == 303
    assert response.headers["location"].startswith("/executions/")
    body = finished(console, response.headers["location"])
    assert body["status"] == "succeeded"
    assert body["result"] == {"host": "db1"}  # no default injected (SPEC §4)
    assert body["requested_by"] == "olga"


def test_every_kind_of_field_reaches_the_skill_typed(console: Console) -> None:
    fields = [
        ("a/host", "db1"),
        ("a/when", "2026-12-03T10:30:00Z"),
        ("a/level", '"high"'),
        ("a/retries", "0"),
        ("a/ratio", "0.5"),
        ("a/verbose", "true"),
        ("a/tags", "web"),
        ("a/tags", "db"),
        ("a/ports", "22"),
        ("a/ports", ""),
        ("a/limits/cpu", "1.5"),
        ("a/extra", '{"nested": {"list": [1, "two", null]}}'),
    ]
    with console.logged_in("olga") as client:
        response = post_run(client, "form_echo", fields)
    assert response.status_code == 303, response.text
    assert finished(console, response.headers["location"])["result"] == {
        "host": "db1",
        "when": "2026-12-03T10:30:00Z",
        "level": "high",
        "retries": 0,
        "ratio": 0.5,
        "verbose": True,
        "tags": ["web", "db"],
        "ports": [22],
        "limits": {"cpu": 1.5},
        "extra": {"nested": {"list": [1, "two", None]}},
    }


def test_the_servers_violations_are_shown_next_to_their_fields(console: Console) -> None:
    before = len(executions(console, "form_echo"))
    with console.logged_in("olga") as client:
        response = post_run(
            client,
            "form_echo",
            [("a/retries", "11"), ("a/ports", "70000"), ("a/limits/memory", "1"), ("a/ratio", "x")],
        )
    assert response.status_code == 400
    assert field_errors(response.text) == {
        "a/host": ["required"],
        "a/retries": ["11 is greater than the maximum of 10"],
        "a/ports": ["item 1: 70000 is greater than the maximum of 65535"],
        "a/limits/cpu": ["required"],
        "a/ratio": ["'x' is not a number"],
    }
    assert 'role="alert"' in response.text
    # The summary lists them in the order of the form, each linked to its field.
    assert re.findall(r'<li><a href="#([\w-]+)"><code>([^<]+)</code></a>', response.text) == [
        ("f0", "/host"),
        ("f5", "/retries"),
        ("f6", "/ratio"),
        ("f9-0", "/ports"),
        ("f11", "/limits/cpu"),
    ]
    assert 'value="11"' in response.text  # what was typed stays in the form
    assert len(executions(console, "form_echo")) == before  # typing problems: nothing submitted


def test_invalid_args_from_the_manager_are_recorded_as_through_rest(console: Console) -> None:
    before = len(executions(console, "form_echo"))
    with console.logged_in("olga") as client:
        response = post_run(client, "form_echo", {"a/host": "h", "a/retries": "99"})
    assert response.status_code == 400
    assert field_errors(response.text) == {"a/retries": ["99 is greater than the maximum of 10"]}
    [latest, *_] = executions(console, "form_echo")
    assert len(executions(console, "form_echo")) == before + 1
    assert latest.status.value == "invalid_args"
    assert latest.error.details == [
        {"pointer": "/retries", "message": "99 is greater than the maximum of 10"}
    ]


@pytest.mark.parametrize(
    ("fields", "status", "says"),
    [
        ({"a/host": "h", "a/unknown": "1"}, 400, "unknown field &#39;a/unknown&#39;"),
        ({"a/host": "h", "confirm": "true"}, 400, "unknown field &#39;confirm&#39;"),
        ({"a/host": "h", "_mode": "yaml"}, 400, "_mode must be fields or json"),
        ({"a/host": "h", "_action": "launch"}, 400, "unknown action"),
        ({"a/host": "h", "_key": "short"}, 400, "_key is not a key this form made"),
        ({"a/host": "h", "persona": "nobody"}, 400, "unknown persona &#39;nobody&#39;"),
        ({"a/host": "x" * 70_000}, 413, "form over 65536 bytes"),
        ({"_mode": "json", "_json": "[" * 15_000}, 400, "nested"),
        ({"_mode": "json", "_json": "[]"}, 400, "args must be a JSON object"),
        ({"_mode": "json", "_json": '{"host": "h", "host": "i"}'}, 400, "duplicate key"),
        (
            {"_mode": "json", "_json": json.dumps({"host": "h", "extra": {"d": nested(70)}})},
            400,
            "nested deeper than 64 levels",
        ),
    ],
)
def test_hostile_run_posts_are_refused_clearly_and_nothing_runs(
    console: Console, fields: dict[str, str], status: int, says: str
) -> None:
    before = ran(console)
    with console.logged_in("olga") as client:
        response = post_run(client, "form_echo", fields)
        assert client.get("/skills/form_echo/run").status_code == 200  # the session is intact
    assert response.status_code == status
    assert says in response.text
    assert ran(console) == before


def approvals(console: Console) -> list[Any]:
    return list(console.store.approvals.query(limit=500))


def confirm_fields(html: str) -> list[tuple[str, str]]:
    """The hidden fields of a confirmation page's form (what it will post back)."""
    form = html[html.index('class="confirm-form"') :]
    pairs = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)
    return [(name, value.replace("&#34;", '"').replace("&#39;", "'")) for name, value in pairs]


def test_a_mutating_run_asks_for_a_confirmation_first_then_runs(console: Console) -> None:
    before = len(executions(console, "restart_cache"))
    with console.logged_in("olga") as client:
        form = client.get("/skills/restart_cache/run").text
        assert "Review and confirm" in form
        review = post_run(client, "restart_cache", {})
        assert review.status_code == 200
        assert "Confirm: restart_cache" in review.text
        assert "It runs as soon as you confirm" in review.text
        assert len(executions(console, "restart_cache")) == before  # nothing yet
        pairs = confirm_fields(review.text)
        assert ("_json", "{}") in pairs
        confirmed = post_form(client, "/skills/restart_cache/run", [*pairs, ("_action", "confirm")])
    assert confirmed.status_code == 303
    body = finished(console, confirmed.headers["location"])
    assert body["status"] == "succeeded"
    assert body["approval_id"] is None  # the confirmation was the one it needed
    entries = console.store.audit.entries(limit=50, action="execution.started")
    assert any(e["subject"] == body["id"] and e["actor"] == "olga" for e in entries)


def test_a_double_posted_confirmation_runs_the_call_once(console: Console) -> None:
    with console.logged_in("olga") as client:
        review = post_run(client, "restart_cache", {})
        pairs = [*confirm_fields(review.text), ("_action", "confirm")]
        first = post_form(client, "/skills/restart_cache/run", pairs)
        second = post_form(client, "/skills/restart_cache/run", pairs)
    assert first.status_code == second.status_code == 303
    assert first.headers["location"] == second.headers["location"]


def test_a_dangerous_run_creates_an_approval_request_for_two_signers(console: Console) -> None:
    with console.logged_in("olga") as client:
        form = client.get("/skills/wipe_scratch/run").text
        assert "two distinct signers" in form
        review = post_run(client, "wipe_scratch", {})
        assert "Request approval: wipe_scratch" in review.text
        assert "_sign" not in review.text  # an operator's confirmation counts for nothing here
        requested = post_form(
            client,
            "/skills/wipe_scratch/run",
            [*confirm_fields(review.text), ("_action", "confirm")],
        )
        assert requested.status_code == 303
        page = client.get(requested.headers["location"]).text
    execution_id = requested.headers["location"].rsplit("/", 1)[1]
    [approval] = [a for a in approvals(console) if a.execution_id == execution_id]
    assert (approval.status, approval.signatures_required, approval.signatures) == (
        "pending",
        2,
        [],
    )
    assert approval.requested_by == "olga"
    assert f'href="/approvals/{approval.id}"' in page
    assert "0 of 2 signatures" in page


def test_an_admin_may_sign_a_dangerous_request_first_by_ticking_it(console: Console) -> None:
    with console.logged_in("admin") as client:
        review = post_run(client, "wipe_scratch", {})
        assert 'name="_sign"' in review.text
        pairs = [*confirm_fields(review.text), ("_sign", "1"), ("_action", "confirm")]
        requested = post_form(client, "/skills/wipe_scratch/run", pairs)
    execution_id = requested.headers["location"].rsplit("/", 1)[1]
    [approval] = [a for a in approvals(console) if a.execution_id == execution_id]
    assert [s.principal for s in approval.signatures] == ["admin"]
    assert approval.signatures_required == 2


def test_a_viewer_gets_no_run_button_and_a_forged_post_is_refused_as_by_rest(
    console: Console,
) -> None:
    with console.logged_in("vera") as client:
        skill_page = client.get("/skills/restart_cache").text
        form = client.get("/skills/restart_cache/run").text
        refused = post_run(client, "restart_cache", {"_action": "confirm"})
        safe_page = client.get("/skills/form_echo").text
    assert "Run…" not in skill_page
    assert "No Run button: role viewer may not run mutating skills" in skill_page
    assert 'value="review"' not in form
    assert "Run…" in safe_page
    assert refused.status_code == 403
    assert "role viewer may not run mutating skills" in refused.text
    [latest, *_] = executions(console, "restart_cache")
    assert (latest.status.value, latest.requested_by) == ("denied", "vera")
    rest = console.rest("POST", "/v1/skills/restart_cache/execute", "vera", json={"confirm": True})
    assert rest.status_code == 403
    assert rest.json()["error"]["message"] == "role viewer may not run mutating skills"


def test_a_persona_the_call_runs_as_is_the_gates_persona(console: Console) -> None:
    with console.logged_in("olga") as client:
        form = client.get("/skills/restart_cache/run").text
        assert "reader · read-only · not offered this skill" in form
        assert "responder · mutating-with-confirm · offered this skill" in form
        refused = post_run(client, "restart_cache", {"persona": "reader"})
        review = post_run(client, "restart_cache", {"persona": "responder"})
        pairs = [*confirm_fields(review.text), ("_action", "confirm")]
        confirmed = post_form(client, "/skills/restart_cache/run", pairs)
    assert refused.status_code == 403
    assert "persona mode read-only does not permit mutating skills" in refused.text
    body = finished(console, confirmed.headers["location"])
    assert (body["status"], body["persona"]) == ("succeeded", "responder")


def test_a_run_post_needs_the_sessions_csrf_token_and_our_origin(console: Console) -> None:
    before = ran(console)
    with console.logged_in("olga") as client:
        csrf = csrf_of(client.get("/skills/form_echo/run").text)
        missing = post_form(client, "/skills/form_echo/run", [("a/host", "h")])
        wrong = post_form(client, "/skills/form_echo/run", [("csrf", "0" * 64), ("a/host", "h")])
        body = urlencode([("csrf", csrf), ("a/host", "h")])
        cross = client.post(
            "/skills/form_echo/run",
            content=body,
            headers={"content-type": FORM, "origin": "http://evil.example"},
        )
        site = client.post(
            "/skills/form_echo/run",
            content=body,
            headers={"content-type": FORM, "sec-fetch-site": "cross-site"},
        )
    with console.http() as anonymous:
        nobody = post_form(anonymous, "/skills/form_echo/run", [("csrf", csrf), ("a/host", "h")])
    assert [r.status_code for r in (missing, wrong, cross, site, nobody)] == [
        403,
        403,
        403,
        403,
        401,
    ]
    assert ran(console) == before


def test_the_args_go_to_json_and_back_to_the_fields(console: Console) -> None:
    with console.logged_in("olga") as client:
        as_json = post_run(
            client, "form_echo", [("a/host", "db1"), ("a/tags", "x"), ("_action", "json")]
        )
        assert as_json.status_code == 200
        assert 'name="_json"' in as_json.text
        assert "&#34;tags&#34;: [\n    &#34;x&#34;\n  ]" in as_json.text
        text = json.dumps({"host": "db2", "verbose": False, "limits": {"cpu": 2}})
        back = post_run(client, "form_echo", {"_mode": "json", "_json": text, "_action": "fields"})
        assert 'name="a/host" type="text" value="db2"' in back.text
        assert '<option value="false" selected>' in back.text
        assert 'name="a/limits/cpu" type="number" value="2"' in back.text
        unfit = post_run(
            client, "form_echo", {"_mode": "json", "_json": '{"host": ""}', "_action": "fields"}
        )
        assert "these args do not fit the fields: edit them as JSON" in unfit.text
        sent = post_run(client, "form_echo", {"_mode": "json", "_json": '{"host": ""}'})
    assert finished(console, sent.headers["location"])["result"] == {"host": ""}


def test_add_a_row_without_javascript_keeps_what_was_typed(console: Console) -> None:
    with console.logged_in("olga") as client:
        added = post_run(
            client, "form_echo", [("a/host", "db1"), ("a/tags", "x"), ("_action", "add a/tags")]
        )
    assert added.status_code == 200
    rows = re.findall(r'name="a/tags" type="text" value="([^"]*)"', added.text)
    assert rows == ["x", "", ""]
    assert 'name="a/host" type="text" value="db1"' in added.text


def test_a_schema_naming_no_property_is_run_from_the_json_box(console: Console) -> None:
    with console.logged_in("vera") as client:
        form = client.get("/skills/free_echo/run").text
        assert '<input type="hidden" name="_mode" value="json">' in form
        assert 'name="_json"' in form
        sent = post_run(client, "free_echo", {"_mode": "json", "_json": '{"any": ["thing"]}'})
    assert finished(console, sent.headers["location"])["result"] == {"any": ["thing"]}
