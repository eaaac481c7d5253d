"""query_promql against a tiny Prometheus-compatible HTTP API on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Reach
from ongrid_skills.builtins.netrules import NetRules
from ongrid_skills.builtins.prom import query_promql
from ongrid_skills.skills.impls import resolve
from tests.support.builtins import assert_schema
from tests.support.http import QuietHandler, serve

NOW = 1714550400.0


class Prometheus(QuietHandler):
    """Answers /api/v1/query and /api/v1/query_range (under any prefix) like Prometheus."""

    requests: ClassVar[list[dict[str, Any]]] = []
    release: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        self.answer(parse_qs(urlsplit(self.path).query))

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        assert self.headers["Content-Type"] == "application/x-www-form-urlencoded"
        self.answer(parse_qs(body))

    def reply(self, status: int, payload: dict[str, Any]) -> None:
        self.send_body(status, json.dumps(payload).encode(), "application/json")

    def answer(self, form: dict[str, list[str]]) -> None:
        params = {key: values[0] for key, values in form.items()}
        path = urlsplit(self.path).path
        type(self).requests.append({"method": self.command, "path": path, "params": params})
        query = params.get("query", "")
        if path.startswith("/missing/"):
            self.send_body(404, b"404 page not found\n")
        elif query == "bad((":
            self.reply(
                400,
                {
                    "status": "error",
                    "errorType": "bad_data",
                    "error": "1:5: parse error: unclosed left parenthesis",
                },
            )
        elif query == "gateway":
            self.send_body(502, b"<html>Bad Gateway</html>", "text/html")
        elif query == "slow":
            type(self).release.wait(10)
            self.reply(200, {"status": "success", "data": {"resultType": "vector", "result": []}})
        elif path.endswith("/api/v1/query"):
            at = float(params.get("time", NOW))
            result = [{"metric": {"__name__": "up", "job": "node"}, "value": [at, "1"]}]
            self.reply(
                200,
                {
                    "status": "success",
                    "data": {"resultType": "vector", "result": result},
                    "warnings": ["this is a test server"],
                },
            )
        elif path.endswith("/api/v1/query_range"):
            start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
            values = []
            t = start
            while t <= end:
                values.append([t, "1"])
                t += step
            result = [{"metric": {"__name__": "up"}, "values": values}]
            self.reply(
                200, {"status": "success", "data": {"resultType": "matrix", "result": result}}
            )
        else:
            self.send_body(404, b"404 page not found\n")


@pytest.fixture
def prom_url() -> Iterator[str]:
    Prometheus.requests.clear()
    Prometheus.release.clear()
    with serve(Prometheus) as server:
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            Prometheus.release.set()


#: The loopback targets these tests use, allowed explicitly (an allow list: nothing else).
LOOPBACK = Reach(net=NetRules.parse(allow=["127.0.0.0/8", "::1", "localhost"]))


def run(url: str | None, **args: Any) -> dict[str, Any]:
    config = {"prometheus.url": url} if url is not None else {}
    result: dict[str, Any] = asyncio.run(
        query_promql(BuiltinContext(config=config, reach=LOOPBACK), **args)
    )
    return result


def test_schema_requires_query_and_bounds_range() -> None:
    assert_schema(
        query_promql,
        ["query"],
        {
            "range_seconds": (1, 366 * 86400),
            "step_seconds": (1, 86400),
            "timeout_ms": (100, 120000),
        },
    )


def test_go_style_alias_resolves_to_the_function() -> None:
    assert resolve("prom.QueryPromQL") == (query_promql, None)
    assert resolve("prom.query_promql") == (query_promql, None)


def test_instant_query_returns_prometheus_data(prom_url: str) -> None:
    result = run(prom_url, query="up")
    assert result["query"] == "up"
    assert result["resultType"] == "vector"
    assert result["result"] == [{"metric": {"__name__": "up", "job": "node"}, "value": [NOW, "1"]}]
    assert result["series"] == 1
    assert result["warnings"] == ["this is a test server"]
    assert result["elapsed_ms"] >= 0
    request = Prometheus.requests[-1]
    assert request["method"] == "GET"
    assert request["path"] == "/api/v1/query"
    assert request["params"] == {"query": "up", "timeout": "10s"}


def test_instant_query_at_an_rfc3339_time(prom_url: str) -> None:
    result = run(prom_url, query="up", time="2024-05-01T08:00:00Z")
    assert Prometheus.requests[-1]["params"]["time"] == "1714550400"
    assert result["time"] == "1714550400"
    run(prom_url, query="up", time=1714550400.5)
    assert Prometheus.requests[-1]["params"]["time"] == "1714550400.5"


def test_range_query_goes_to_query_range(prom_url: str) -> None:
    result = run(prom_url, query="up", time=NOW, range_seconds=600, step_seconds=60)
    assert result["resultType"] == "matrix"
    assert len(result["result"][0]["values"]) == 11
    assert (result["start"], result["end"], result["step_seconds"]) == (
        "1714549800",
        "1714550400",
        60,
    )
    request = Prometheus.requests[-1]
    assert request["path"] == "/api/v1/query_range"
    assert request["params"]["step"] == "60"


def test_range_query_picks_a_step(prom_url: str) -> None:
    result = run(prom_url, query="up", time=NOW, range_seconds=3600)
    assert result["step_seconds"] == 15
    assert len(result["result"][0]["values"]) == 241


def test_url_prefix_and_trailing_slash(prom_url: str) -> None:
    run(f"{prom_url}/prometheus/", query="up")
    assert Prometheus.requests[-1]["path"] == "/prometheus/api/v1/query"


def test_long_query_is_posted_as_a_form(prom_url: str) -> None:
    query = "sum(" + " + ".join(f'up{{job="j{i}"}}' for i in range(400)) + ")"
    result = run(prom_url, query=query)
    assert result["resultType"] == "vector"
    request = Prometheus.requests[-1]
    assert request["method"] == "POST"
    assert request["params"]["query"] == query


def test_prometheus_error_is_a_failure_with_its_message(prom_url: str) -> None:
    with pytest.raises(
        BuiltinFailure, match=r"Prometheus error \(bad_data\): 1:5: parse error: unclosed"
    ):
        run(prom_url, query="bad((")


def test_non_json_answer_is_a_failure(prom_url: str) -> None:
    with pytest.raises(BuiltinFailure, match="HTTP 502 without a JSON body"):
        run(prom_url, query="gateway")
    with pytest.raises(BuiltinFailure, match="HTTP 404 without a JSON body"):
        run(f"{prom_url}/missing", query="up")


def test_slow_server_fails_within_budget(prom_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(BuiltinFailure, match="within 300 ms"):
        run(prom_url, query="slow", timeout_ms=300)
    assert time.monotonic() - started < 3


def test_unreachable_server_fails() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        with pytest.raises(BuiltinFailure, match="cannot connect to Prometheus"):
            run(f"http://127.0.0.1:{closed.getsockname()[1]}", query="up")


def test_missing_or_bad_config_fails() -> None:
    with pytest.raises(BuiltinFailure, match=r"prometheus\.url is not set"):
        run(None, query="up")
    with pytest.raises(BuiltinFailure, match="scheme"):
        run("file:///etc/passwd", query="up")


@pytest.mark.parametrize(
    "args",
    [
        {"query": "  "},
        {"query": "up", "step_seconds": 60},
        {"query": "up", "range_seconds": 30 * 86400, "step_seconds": 1},
        {"query": "up", "time": "yesterday-ish"},
        {"query": "up", "time": float("nan")},
        {"query": "up", "range_seconds": 0},
    ],
)
def test_invalid_arguments_fail_before_any_request(prom_url: str, args: dict[str, Any]) -> None:
    with pytest.raises(BuiltinFailure):
        run(prom_url, **args)
    assert Prometheus.requests == []
