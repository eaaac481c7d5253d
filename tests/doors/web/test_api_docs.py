"""The REST API's reference in the console: ``/docs`` for a session (the login page first
without one, never a JSON 401 a browser cannot use), and its OpenAPI document for the session,
the same the REST door gives a token."""

from __future__ import annotations

from tests.support.browser import Console


def test_docs_sends_a_browser_without_a_session_to_the_login_page(console: Console) -> None:
    with console.http() as client:
        page = client.get("/docs")
        document = client.get("/docs/openapi.json")
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=/docs"
    assert document.status_code == 303


def test_docs_lists_every_operation_of_the_api_for_any_session(console: Console) -> None:
    document = console.rest("GET", "/openapi.json", "vera").json()
    with console.logged_in("vera") as client:
        page = client.get("/docs")
        served = client.get("/docs/openapi.json")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    operations = [
        f"{method.upper()}</span> {path}"
        for path, item in document["paths"].items()
        for method in item
    ]
    assert len(operations) > 30
    for operation in operations:
        assert operation in page.text
    assert served.status_code == 200
    assert served.json() == document
    assert served.headers["cache-control"] == "no-store"


def test_the_rest_door_serves_no_swagger_page_from_a_cdn(console: Console) -> None:
    answer = console.rest("GET", "/docs", "admin", follow_redirects=False)
    assert "cdn.jsdelivr.net" not in answer.text
