"""probe_http against a real HTTP(S) server on loopback.

These tests allow bodies from 127.0.0.1 explicitly (the default returns none); the refusals and
the withheld body are tested in test_reach_net.py.
"""

from __future__ import annotations

import asyncio
import gzip
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Reach
from ongrid_skills.builtins.http import probe_http
from ongrid_skills.builtins.netrules import NetRules
from tests.support.builtins import assert_schema
from tests.support.http import QuietHandler, serve

BIG = 2 * 1024 * 1024


class Handler(QuietHandler):
    release: ClassVar[threading.Event] = threading.Event()
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        type(self).seen.append({"method": self.command, "path": self.path, **self.headers})
        path = self.path
        if path == "/ok":
            self.send_body(200, b"hello, world\n")
        elif path == "/redirect":
            self.send_body(302, b"moved\n", Location="/ok")
        elif path == "/loop":
            self.send_body(302, b"again\n", Location="/loop")
        elif path == "/big":
            self.send_body(200, b"x" * BIG, "application/octet-stream")
        elif path.startswith("/status/"):
            self.send_body(int(path.rsplit("/", 1)[1]), b"status\n")
        elif path == "/latin1":
            self.send_body(200, "café".encode("latin-1"), "text/plain; charset=iso-8859-1")
        elif path == "/binary":
            self.send_body(200, b"ok\xff\xfe\x00end", "application/octet-stream")
        elif path == "/gzip":
            self.send_body(200, gzip.compress(b"zipped"), "text/plain", Content_Encoding="gzip")
        elif path == "/hang":
            type(self).release.wait(10)
            self.send_body(200, b"late\n")
        else:
            self.send_body(404, b"not found\n")


@pytest.fixture
def base_url() -> Iterator[str]:
    Handler.release.clear()
    Handler.seen.clear()
    with serve(Handler) as server:
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            Handler.release.set()


#: The loopback test servers' bodies may be returned.
LOOPBACK_BODIES = Reach(net=NetRules.parse(body_allow=["127.0.0.1"]))


def run(**args: Any) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(probe_http(BuiltinContext(reach=LOOPBACK_BODIES), **args))
    return result


def test_schema_requires_url_and_bounds_limits() -> None:
    schema = assert_schema(
        probe_http,
        ["url"],
        {"timeout_ms": (1, 60000), "expect_status": (100, 599), "max_body_bytes": (0, 1048576)},
    )
    assert schema["properties"]["method"]["enum"] == ["GET", "HEAD"]
    assert schema["properties"]["follow_redirects"]["default"] is False


def test_get_reports_status_headers_and_body(base_url: str) -> None:
    result = run(url=f"{base_url}/ok")
    assert result["status"] == 200
    assert result["ok"] is True
    assert result["body_excerpt"] == "hello, world\n"
    assert result["body_truncated"] is False
    assert result["headers"]["content-type"] == "text/plain; charset=utf-8"
    assert "server" in result["headers"]
    assert result["tls"] is None
    assert result["elapsed_ms"] >= result["headers_ms"] >= 0
    request = Handler.seen[-1]
    assert request["Accept-Encoding"] == "identity"
    assert request["User-Agent"].startswith("ongrid-skills")


def test_head_reads_no_body(base_url: str) -> None:
    result = run(url=f"{base_url}/ok", method="HEAD")
    assert result["status"] == 200
    assert result["body_excerpt"] is None
    assert result["body_bytes"] == 0
    assert Handler.seen[-1]["method"] == "HEAD"


def test_redirect_is_reported_not_followed(base_url: str) -> None:
    result = run(url=f"{base_url}/redirect")
    assert result["status"] == 302
    assert result["ok"] is True
    assert result["headers"]["location"] == "/ok"
    assert result["body_excerpt"] == "moved\n"
    assert [r["path"] for r in Handler.seen] == ["/redirect"]
    assert "final_url" not in result


def test_redirect_followed_on_request(base_url: str) -> None:
    result = run(url=f"{base_url}/redirect", follow_redirects=True)
    assert result["status"] == 200
    assert result["final_url"] == f"{base_url}/ok"
    assert result["redirects"] == [{"status": 302, "url": f"{base_url}/redirect"}]


def test_redirect_loop_fails(base_url: str) -> None:
    with pytest.raises(BuiltinFailure, match="redirects"):
        run(url=f"{base_url}/loop", follow_redirects=True)


def test_body_is_capped(base_url: str) -> None:
    result = run(url=f"{base_url}/big", max_body_bytes=1000)
    assert result["status"] == 200
    assert result["body_bytes"] == 1000
    assert result["body_excerpt"] == "x" * 1000
    assert result["body_truncated"] is True
    assert result["headers"]["content-length"] == str(BIG)


def test_zero_body_bytes_reads_nothing(base_url: str) -> None:
    result = run(url=f"{base_url}/big", max_body_bytes=0)
    assert result["body_excerpt"] == ""
    assert result["body_bytes"] == 0


def test_body_decoded_with_charset_and_replacement(base_url: str) -> None:
    assert run(url=f"{base_url}/latin1")["body_excerpt"] == "café"
    assert run(url=f"{base_url}/binary")["body_excerpt"] == "ok\ufffd\ufffd\x00end"


def test_encoded_body_is_not_decoded(base_url: str) -> None:
    result = run(url=f"{base_url}/gzip")
    assert result["body_excerpt"] is None
    assert "gzip" in result["body_note"]


def test_expect_status_decides_ok(base_url: str) -> None:
    assert run(url=f"{base_url}/status/503")["ok"] is False
    assert run(url=f"{base_url}/status/503", expect_status=503)["ok"] is True
    assert run(url=f"{base_url}/ok", expect_status=204)["ok"] is False
    assert run(url=f"{base_url}/missing")["status"] == 404


def test_environment_proxies_are_ignored(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "")
    assert run(url=f"{base_url}/ok")["status"] == 200


def test_slow_server_fails_within_budget(base_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(BuiltinFailure, match=r"300 ms|timed out"):
        run(url=f"{base_url}/hang", timeout_ms=300)
    assert time.monotonic() - started < 3


def test_refused_connection_fails() -> None:
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        with pytest.raises(BuiltinFailure, match="cannot connect"):
            run(url=f"http://127.0.0.1:{port}/", timeout_ms=2000)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://127.0.0.1/",
        "gopher://127.0.0.1/",
        "127.0.0.1:80/",
        "http://",
        "http://user:secret@127.0.0.1/",
        "http://127.0.0.1/a b",
        "",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(BuiltinFailure):
        run(url=url)


def test_only_get_and_head(base_url: str) -> None:
    with pytest.raises(BuiltinFailure, match="GET and HEAD"):
        run(url=f"{base_url}/ok", method="POST")
    assert Handler.seen == []


@pytest.fixture
def tls_url(tmp_path: Path) -> Iterator[str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    Handler.seen.clear()
    with serve(Handler) as server:
        server.socket = context.wrap_socket(server.socket, server_side=True)
        yield f"https://127.0.0.1:{server.server_address[1]}"


def test_https_reports_tls_when_verification_is_off(tls_url: str) -> None:
    result = run(url=f"{tls_url}/ok", verify_tls=False)
    assert result["status"] == 200
    assert result["tls"]["version"].startswith("TLS")
    assert result["tls"]["cipher"]


def test_https_self_signed_fails_verification(tls_url: str) -> None:
    with pytest.raises(BuiltinFailure, match=r"(?i)certificate"):
        run(url=f"{tls_url}/ok")
