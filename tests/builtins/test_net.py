"""probe_tcp against real loopback sockets: a listener, a bound-but-closed port, a full backlog."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Reach
from ongrid_skills.builtins.net import probe_tcp
from ongrid_skills.builtins.netrules import NetRules
from tests.support.builtins import assert_schema
from tests.support.sockets import fill_backlog

#: The loopback targets these tests use, allowed explicitly (an allow list: nothing else).
LOOPBACK = Reach(net=NetRules.parse(allow=["127.0.0.0/8", "::1", "localhost"]))


def run(**args: Any) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(probe_tcp(BuiltinContext(reach=LOOPBACK), **args))
    return result


@contextlib.contextmanager
def listener(backlog: int = 16) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    try:
        yield sock
    finally:
        sock.close()


def test_schema_requires_host_and_port_with_bounds() -> None:
    schema = assert_schema(
        probe_tcp, ["host", "port"], {"port": (1, 65535), "timeout_ms": (1, 60000)}
    )
    assert schema["properties"]["timeout_ms"]["default"] == 2000


def test_open_port_reports_connected_with_address() -> None:
    with listener() as server:
        port = server.getsockname()[1]
        result = run(host="127.0.0.1", port=port)
    assert result["open"] is True
    assert result["reason"] == "connected"
    assert result["address"] == f"127.0.0.1:{port}"
    assert result["host"] == "127.0.0.1"
    assert result["port"] == port
    assert result["error"] is None
    assert 0 <= result["elapsed_ms"] < 2000


def test_name_is_resolved_before_connecting() -> None:
    with listener() as server:
        port = server.getsockname()[1]
        result = run(host="localhost", port=port)
    assert result["open"] is True
    assert result["address"] == f"127.0.0.1:{port}"


def test_bound_but_not_listening_port_is_refused() -> None:
    # Bound (so nobody else takes it) but not listening: the kernel answers with a RST.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        result = run(host="127.0.0.1", port=port)
    assert result["open"] is False
    assert result["reason"] == "refused"
    assert result["address"] == f"127.0.0.1:{port}"


def test_full_backlog_times_out_within_budget() -> None:
    with listener(backlog=0) as server:
        clients = fill_backlog(server)
        try:
            started = time.monotonic()
            result = run(host="127.0.0.1", port=server.getsockname()[1], timeout_ms=300)
            took = time.monotonic() - started
        finally:
            for client in clients:
                client.close()
    assert result["open"] is False
    assert result["reason"] == "timeout"
    assert result["elapsed_ms"] >= 250
    assert took < 3


def test_unknown_name_reports_dns() -> None:
    result = run(host="nonexistent.invalid", port=80, timeout_ms=5000)
    assert result["open"] is False
    assert result["reason"] == "dns"
    assert result["address"] is None
    assert "nonexistent.invalid" in result["error"]


@pytest.mark.parametrize("host", ["", "  ", "-oProxyCommand=x", "a b", "bad\nhost"])
def test_invalid_hosts_are_refused(host: str) -> None:
    with pytest.raises(BuiltinFailure):
        run(host=host, port=80)


def test_out_of_range_arguments_are_refused() -> None:
    with pytest.raises(BuiltinFailure, match="port"):
        run(host="127.0.0.1", port=0)
    with pytest.raises(BuiltinFailure, match="timeout_ms"):
        run(host="127.0.0.1", port=80, timeout_ms=0)
