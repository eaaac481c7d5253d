"""The catalogue and skill pages over HTTP, and the one state change of the catalogue (reload),
which follows the REST rule for every role."""

from __future__ import annotations

import html
import re

import pytest

from tests.support.browser import ODD_TEXT, Console


def shown_names(page: str) -> list[str]:
    return re.findall(r'class="skill-name" href="/skills/[^"]+">([^<]+)<', page)


def test_the_catalogue_lists_every_skill_grouped_with_class_and_availability(
    console: Console,
) -> None:
    with console.logged_in("vera") as client:
        page = client.get("/skills").text
    registry = console.manager.registry
    assert sorted(shown_names(page)) == sorted(registry.skills)
    groups = re.findall(r'<h2 id="group-\d+">([^<]+)</h2>', page)
    assert groups == sorted({s.category for s in registry.skills.values()})
    assert '<span class="badge class-dangerous">dangerous</span>' in page
    assert '<span class="badge class-mutating">mutating</span>' in page
    # Every skill here is available: no badge says so (one is shown only where it is not).
    assert 'class="badge available"' not in page
    assert 'class="badge unavailable"' not in page


def test_a_search_on_the_page_lists_the_best_match_first(console: Console) -> None:
    with console.logged_in("vera") as client:
        page = client.get("/skills", params={"q": "port check"}).text
    hits = console.manager.registry.search_index().search("port check", 50)
    assert shown_names(page) == [skill.name for skill, _score in hits]
    assert shown_names(page)[0] == "port_check"
    assert "best match first" in page


def test_filters_on_the_page_keep_what_they_say(console: Console) -> None:
    with console.logged_in("vera") as client:
        mutating = shown_names(client.get("/skills", params={"class": "mutating"}).text)
        reader = shown_names(client.get("/skills", params={"persona": "reader"}).text)
        testing = shown_names(client.get("/skills", params={"category": "testing"}).text)
        external = shown_names(client.get("/skills", params={"source": "external"}).text)
    assert sorted(mutating) == ["disk_cleaner", "restart_cache"]
    assert sorted(reader) == ["host_info", "log_grep", "port_check"]
    assert sorted(testing) == ["gated_wait", "odd_text", "restart_cache", "wipe_scratch"]
    assert "disk_cleaner" in external


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"class": "harmless"}, 400),
        ({"page": "0"}, 400),
        ({"page": "many"}, 400),
        ({"q": "x" * 201}, 400),
        ({"persona": "nobody"}, 404),
    ],
)
def test_a_bad_catalogue_query_gets_a_clear_error_page(
    console: Console, params: dict[str, str], status: int
) -> None:
    with console.logged_in("vera") as client:
        response = client.get("/skills", params=params)
    assert response.status_code == status
    assert '<p class="error-message" role="alert">' in response.text


def test_text_from_skill_files_is_shown_as_text_never_as_markup(console: Console) -> None:
    with console.logged_in("vera") as client:
        listing = client.get("/skills", params={"q": "odd_text"}).text
        page = client.get("/skills/odd_text").text
    for text in (listing, page):
        assert html.escape(ODD_TEXT, quote=False) in text.replace("&#34;", '"')
        assert "<script>alert" not in text
        assert "<b>bold" not in text


def test_the_skill_page_shows_what_defines_the_skill(console: Console) -> None:
    skill = console.manager.registry.get("disk_cleaner")
    with console.logged_in("vera") as client:
        page = client.get("/skills/disk_cleaner").text
    assert html.unescape(page).count(skill.description) == 1
    assert skill.definition_hash in page
    assert "&#34;older_than_days&#34;: {" in page  # the schema, indented
    assert "\n  &#34;properties&#34;: {\n    &#34;path&#34;: {" in page
    assert "external" in page
    assert '<span class="badge class-mutating">mutating</span>' in page
    assert "No execution of this skill yet." in page


def test_the_skill_page_shows_what_the_kernel_lets_a_call_touch(console: Console) -> None:
    with console.logged_in("vera") as client:
        confined = client.get("/skills/odd_text").text
        plain = client.get("/skills/disk_cleaner").text
    assert "<dt>Sandbox</dt>" in confined
    assert "<strong>strict</strong>; writes <code>/var/tmp</code>; network none" in confined
    assert "<dt>Sandbox</dt>" not in plain


def test_the_skill_page_lists_recent_executions_newest_first(console: Console) -> None:
    ids = []
    for _ in range(3):
        done = console.rest("POST", "/v1/skills/odd_text/execute", "olga", json={"args": {}})
        assert done.json()["status"] == "succeeded"
        ids.append(done.json()["id"])
    with console.logged_in("vera") as client:
        page = client.get("/skills/odd_text").text
    listed = re.findall(r'<td><a href="/executions/([0-9a-f]+)"><code>\1</code></a></td>', page)
    assert listed[:3] == ids[::-1]
    assert page.count('<span class="status status-succeeded">succeeded</span>') >= 3
    assert ">olga<" in page


def test_an_unknown_skill_is_a_404_page(console: Console) -> None:
    with console.logged_in("vera") as client:
        response = client.get("/skills/no_such_skill")
    assert response.status_code == 404
    assert "no_such_skill" in response.text


@pytest.mark.parametrize(("who", "status"), [("vera", 403), ("olga", 403), ("admin", 303)])
def test_reloading_from_the_page_follows_the_rest_rule_for_each_role(
    console: Console, who: str, status: int
) -> None:
    before = console.store.audit.entries(limit=1000, action="registry.reloaded")
    rest = console.rest("POST", "/v1/reload", who).status_code
    rest_reloads = 1 if rest == 200 else 0
    with console.logged_in(who) as client:
        page = client.get("/skills").text
        response = client.post("/reload", data={"csrf": console.csrf(client)})
    after = console.store.audit.entries(limit=1000, action="registry.reloaded")
    assert response.status_code == status
    assert rest == (200 if status == 303 else 403)  # the same answer through either door
    assert ("Reload skills" in page) is (status == 303)  # and no button where it is refused
    reloaded_here = len(after) - len(before) - rest_reloads
    assert reloaded_here == (1 if status == 303 else 0)
    if status == 303:
        assert after[0]["actor"] == who
        registry = console.manager.registry
        assert response.headers["location"] == f"/skills?reloaded={len(registry)}&refused=0"
    else:
        assert "admin role" in response.text
