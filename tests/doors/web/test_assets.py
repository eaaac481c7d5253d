"""Static files: content-hashed URLs cached for a year, only our own files, and no way out of
them (the request path is sent raw, as a hostile client would)."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ongrid_skills.doors.web.assets import STATIC_DIR, Assets
from tests.support.browser import Console


def raw_get(url: str, target: str) -> tuple[int, bytes]:
    """GET ``target`` exactly as written (no client normalises it), over a fresh connection."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def asset_urls(html: str) -> list[str]:
    return re.findall(r'(?:href|src)="(/static/[^"]+)"', html)


def test_pages_name_their_files_by_content_hash_and_files_are_cached_for_a_year(
    console: Console,
) -> None:
    with console.http() as client:
        page = client.get("/login")
        urls = asset_urls(page.text)
        answers = [client.get(url) for url in urls]
    digest = console.web.state.assets.digest
    assert {url.split("/")[2] for url in urls} == {digest}
    assert {url.rsplit("/", 1)[1] for url in urls} >= {"app.css", "app.js", "icon.svg"}
    for url, answer in zip(urls, answers, strict=True):
        assert answer.status_code == 200, url
        assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
        name = url.split("/", 3)[3]
        assert answer.content == (STATIC_DIR / name).read_bytes()
    types = {
        url.rsplit(".", 1)[1]: a.headers["content-type"]
        for url, a in zip(urls, answers, strict=True)
    }
    assert types["css"].startswith("text/css")
    assert types["js"].startswith("text/javascript")


def test_the_digest_changes_with_any_files_content(tmp_path: Path) -> None:
    (tmp_path / "css").mkdir()
    (tmp_path / "css" / "a.css").write_text("a{}")
    first = Assets(tmp_path)
    (tmp_path / "css" / "a.css").write_text("a{color:red}")
    second = Assets(tmp_path)
    (tmp_path / "notes.txt").write_text("not served")
    third = Assets(tmp_path)
    assert first.digest != second.digest
    assert third.digest == second.digest
    assert list(third.files) == ["css/a.css"]


def test_a_page_script_imports_its_modules_by_relative_url_inside_one_version() -> None:
    """Why one digest for all: ./parts/x.js and ../live.js stay in the same version."""
    app_js = (STATIC_DIR / "js" / "app.js").read_text()
    part = (STATIC_DIR / "js" / "parts" / "execution-status.js").read_text()
    assert "import(`./parts/${name}.js`)" in app_js
    assert 'from "../live.js"' in part


@pytest.mark.parametrize(
    "target",
    [
        "/static/{digest}/../../../../pyproject.toml",
        "/static/{digest}/%2e%2e/%2e%2e/%2e%2e/%2e%2e/pyproject.toml",
        "/static/{digest}/..%2f..%2f..%2f..%2fpyproject.toml",
        "/static/{digest}/css/..%5c..%5capp.py",
        "/static/{digest}//etc/passwd",
        "/static/{digest}/%2fetc%2fpasswd",
        "/static/{digest}/css/app.css%00.js",
        "/static/{digest}/../app.py",
        "/static/{digest}/",
        "/static/0000000000000000/css/app.css",
        "/static/../doors/web/app.py",
        "/static/{digest}/CSS/APP.CSS",
    ],
)
def test_a_static_path_outside_our_files_is_not_found(console: Console, target: str) -> None:
    status, body = raw_get(console.url, target.format(digest=console.web.state.assets.digest))
    assert status in (400, 404)
    assert b"[project]" not in body
    assert b"root:" not in body
    assert b"build_web_app" not in body
