"""Hostile form posts against the served console: whatever the body, a clear refusal (400,
413), the session intact, and nothing changed."""

from __future__ import annotations

import pytest

from ongrid_skills.doors.web.forms import Form
from ongrid_skills.errors import InvalidRequest
from tests.support.browser import Console


def reloads(console: Console) -> int:
    return len(console.store.audit.entries(limit=1000, action="registry.reloaded"))


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("multipart/form-data; boundary=x", b"--x\r\n\r\n--x--\r\n", 400),
        ("application/json", b'{"csrf": "x"}', 400),
        ("text/plain", b"csrf=x", 400),
        ("application/x-www-form-urlencoded", b"csrf=%FF%FE", 400),  # not UTF-8
        ("application/x-www-form-urlencoded", "csrf=é".encode(), 400),  # raw non-ASCII
        ("application/x-www-form-urlencoded", b"&".join([b"f=1"] * 300), 400),  # fields
        ("application/x-www-form-urlencoded", b"csrf=a&csrf=b", 400),  # a field twice
        ("application/x-www-form-urlencoded", b"x=" + b"a" * (70 * 1024), 413),
        ("application/x-www-form-urlencoded", b"\x00\x01\x02", 403),  # no token in it
    ],
)
def test_a_bad_form_body_is_refused_clearly_and_changes_nothing(
    console: Console, content_type: str, body: bytes, status: int
) -> None:
    before = reloads(console)
    with console.logged_in("admin") as client:
        response = client.post("/reload", content=body, headers={"content-type": content_type})
        still = client.get("/skills")
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert still.status_code == 200
    assert reloads(console) == before


def test_a_body_over_the_limit_without_a_length_is_refused_while_it_streams(
    console: Console,
) -> None:
    def chunks() -> object:
        for _ in range(100):
            yield b"a" * 1024

    with console.logged_in("admin") as client:
        response = client.post(
            "/reload",
            content=chunks(),  # type: ignore[arg-type]
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
    assert response.status_code == 413


def test_a_login_post_with_garbage_is_a_clear_refusal(console: Console) -> None:
    with console.http() as client:
        for headers, body in [
            ({"content-type": "application/json"}, b'{"token": "x"}'),
            ({"content-type": "application/x-www-form-urlencoded"}, b"token=%FF"),
            ({"content-type": "application/x-www-form-urlencoded"}, b"token=a&token=b"),
            ({}, b""),
        ]:
            response = client.post("/login", content=body, headers=headers)
            assert response.status_code in (400, 403), (headers, body, response.status_code)
            assert "ongrid_session" not in response.headers.get("set-cookie", "")


def test_a_form_gives_a_field_once_or_all_its_values_and_refuses_a_field_sent_twice() -> None:
    form = Form([("persona", "reader"), ("tag", "a"), ("tag", "b"), ("empty", "")])
    assert form.get("persona") == "reader"
    assert form.get("empty") == ""
    assert form.get("missing") is None
    assert form.get("missing", "x") == "x"
    assert form.all("tag") == ["a", "b"]
    with pytest.raises(InvalidRequest, match="'tag' was sent 2 times"):
        form.get("tag")
