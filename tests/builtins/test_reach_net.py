"""The probes reach only what the operator's net rules allow; probe_http bodies only when allowed.

Real loopback listeners. A refusal is a ForbiddenTarget (``error.code = forbidden_target``) and
happens before any connection: the listeners check that nothing arrived.
"""

from __future__ import annotations

import asyncio
import doctest
import socket
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from ongrid_skills import ConfigError, Settings
from ongrid_skills.builtins import netrules
from ongrid_skills.builtins.base import BuiltinContext, ForbiddenTarget, Reach
from ongrid_skills.builtins.dns import probe_dns
from ongrid_skills.builtins.http import probe_http
from ongrid_skills.builtins.net import probe_tcp
from ongrid_skills.builtins.netrules import NetRules
from ongrid_skills.builtins.prom import query_promql
from tests.support.http import QuietHandler, serve

SECRET = b"AKIA-very-secret-role-credentials"


def reach(**lists: list[str]) -> Reach:
    return Reach(net=NetRules.parse(**lists))


def call(
    fn: Any, rules: Reach | None = None, config: dict[str, str] | None = None, **args: Any
) -> Any:
    ctx = BuiltinContext(config=config or {}, reach=rules or Reach())
    return asyncio.run(fn(ctx, **args))


class Metadata(QuietHandler):
    """A loopback stand-in for a metadata service: its body is a secret."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        if self.path == "/to-metadata":
            self.send_body(302, b"", Location="http://169.254.169.254/latest/meta-data/")
        else:
            self.send_body(200, SECRET)


@pytest.fixture
def metadata() -> Iterator[int]:
    Metadata.hits.clear()
    with serve(Metadata) as server:
        yield int(server.server_address[1])


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback TCP listener; ``accepted(sock)`` tells whether anything connected."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def test_netrules_doctests() -> None:
    assert doctest.testmod(netrules).failed == 0


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "169.254.0.1",
        "2852039166",  # 169.254.169.254 written as one number: resolved, then checked
        "::ffff:169.254.169.254",
        "[fe80::1]",
        "fd00:ec2::254",
        "0.0.0.0",
        "metadata.google.internal",
        "METADATA.Google.Internal.",
    ],
)
def test_probe_tcp_never_reaches_link_local_or_metadata(host: str) -> None:
    with pytest.raises(ForbiddenTarget) as caught:
        call(probe_tcp, host=host, port=80, timeout_ms=2000)
    assert caught.value.code == "forbidden_target"


def test_the_allow_list_does_not_lift_the_metadata_deny() -> None:
    rules = reach(allow=["169.254.0.0/16", "0.0.0.0/0"])
    with pytest.raises(ForbiddenTarget, match="never reachable"):
        call(probe_tcp, rules, host="169.254.169.254", port=80)


def test_loopback_is_reachable_by_default(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert call(probe_tcp, host="127.0.0.1", port=port)["open"] is True


def test_a_denied_cidr_is_refused_before_any_connect(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    rules = reach(deny=["127.0.0.0/8", "::1"])
    for host in ("127.0.0.1", "localhost"):  # a name: its resolved addresses are checked
        with pytest.raises(ForbiddenTarget, match="builtin_net_deny"):
            call(probe_tcp, rules, host=host, port=port)
    assert not connected(listener)


def test_a_denied_name_is_refused_before_it_is_resolved(listener: socket.socket) -> None:
    rules = reach(deny=["localhost", "*.corp.example"])
    with pytest.raises(ForbiddenTarget, match="builtin_net_deny"):
        call(probe_tcp, rules, host="localhost", port=listener.getsockname()[1])
    with pytest.raises(ForbiddenTarget, match="builtin_net_deny"):
        call(probe_dns, rules, name="db.corp.example")
    assert not connected(listener)


def test_an_allow_list_admits_only_its_targets(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    with pytest.raises(ForbiddenTarget, match="not listed in builtin_net_allow"):
        call(probe_tcp, reach(allow=["192.0.2.0/24"]), host="127.0.0.1", port=port)
    assert not connected(listener)
    assert call(probe_tcp, reach(allow=["127.0.0.1"]), host="127.0.0.1", port=port)["open"]
    assert call(probe_tcp, reach(allow=["localhost"]), host="localhost", port=port)["open"]


def test_probe_dns_applies_the_same_rules() -> None:
    assert "127.0.0.1" in call(probe_dns, name="localhost")["addresses"]
    for name in ("169.254.169.254", "metadata.google.internal"):
        with pytest.raises(ForbiddenTarget):
            call(probe_dns, name=name)
    with pytest.raises(ForbiddenTarget, match="builtin_net_allow"):
        call(probe_dns, reach(allow=["192.0.2.0/24"]), name="localhost")


def test_probe_http_never_reaches_metadata_even_through_a_redirect(metadata: int) -> None:
    with pytest.raises(ForbiddenTarget):
        call(probe_http, url="http://169.254.169.254/latest/meta-data/", timeout_ms=2000)
    with pytest.raises(ForbiddenTarget):
        call(probe_http, url="http://metadata.google.internal/computeMetadata/v1/")
    url = f"http://127.0.0.1:{metadata}/to-metadata"
    with pytest.raises(ForbiddenTarget, match=r"169\.254\.169\.254"):
        call(probe_http, url=url, follow_redirects=True, timeout_ms=2000)
    assert Metadata.hits == ["/to-metadata"]


def test_probe_http_refuses_a_denied_loopback_listener(metadata: int) -> None:
    rules = reach(deny=["127.0.0.0/8", "::1"])
    for host in ("127.0.0.1", "localhost"):
        with pytest.raises(ForbiddenTarget, match="builtin_net_deny"):
            call(probe_http, rules, url=f"http://{host}:{metadata}/")
    assert Metadata.hits == []


def test_probe_http_returns_no_body_unless_the_target_is_allowed(metadata: int) -> None:
    url = f"http://127.0.0.1:{metadata}/secret"
    result = call(probe_http, url=url)
    assert result["status"] == 200
    assert result["body_withheld"] is True
    assert result["body_excerpt"] is None
    assert result["body_bytes"] == 0
    assert "builtin_http_body_allow" in result["body_note"]
    assert SECRET.decode() not in repr(result)
    assert result["headers"]["content-length"] == str(len(SECRET))  # status, headers, timing
    for allowed in (["127.0.0.1"], ["127.0.0.0/8"]):
        shown = call(probe_http, reach(body_allow=allowed), url=url)
        assert shown["body_excerpt"] == SECRET.decode()
    by_name = call(probe_http, reach(body_allow=["localhost"]), url=f"http://localhost:{metadata}/")
    assert by_name["body_excerpt"] == SECRET.decode()
    other = call(probe_http, reach(body_allow=["192.0.2.0/24"]), url=url)
    assert other["body_withheld"] is True


def test_query_promql_refuses_a_metadata_prometheus_url() -> None:
    config = {"prometheus.url": "http://169.254.169.254:9090"}
    with pytest.raises(ForbiddenTarget):
        call(query_promql, config=config, query="up")


def test_net_lists_come_from_the_environment_and_bad_entries_fail_at_start() -> None:
    settings = Settings.load(
        environ={
            "ONGRID_BUILTIN_NET_ALLOW": "10.0.0.0/8, *.internal fd00::/8",
            "ONGRID_BUILTIN_NET_DENY": "10.9.0.0/16",
            "ONGRID_BUILTIN_HTTP_BODY_ALLOW": "status.internal",
        }
    )
    assert settings.builtin_net_allow == ("10.0.0.0/8", "*.internal", "fd00::/8")
    rules = Reach.from_settings(settings).net
    assert rules.allow.has_name("prom.internal")
    assert rules.body_allowed("status.internal", None)
    bad = Settings.load(environ={"ONGRID_BUILTIN_NET_DENY": "10.0.0.0/33"})
    with pytest.raises(ConfigError, match="builtin_net_deny"):
        Reach.from_settings(bad)
