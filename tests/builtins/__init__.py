"""Tests of the built-in ops skills, each against a real local target (no mocks).

Shared helpers: :func:`assert_schema` checks the JSON schema derived from a built-in's signature,
:func:`serve` runs a real HTTP server on loopback in a thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema_rs

from ongrid_skills.skills.impls import Builtin
from ongrid_skills.skills.schemas import signature_schema


def _branch(prop: dict[str, Any], key: str) -> dict[str, Any]:
    """The branch of ``prop`` (itself, or one of its anyOf) that carries ``key``."""
    if key in prop:
        return prop
    for branch in prop.get("anyOf", []):
        if key in branch:
            return dict(branch)
    raise AssertionError(f"no {key!r} in {prop}")


def assert_schema(
    fn: Builtin,
    required: list[str],
    bounds: dict[str, tuple[int | None, int | None]],
) -> dict[str, Any]:
    """An object schema, closed, valid Draft 2020-12, described, with these required params and
    these (minimum, maximum) bounds."""
    schema: dict[str, Any] = signature_schema(fn)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert sorted(schema.get("required", [])) == sorted(required)
    assert jsonschema_rs.meta.is_valid(schema)
    assert "ctx" not in schema["properties"]
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{name} has no description"
    for name, (low, high) in bounds.items():
        prop = schema["properties"][name]
        if low is not None:
            assert _branch(prop, "minimum")["minimum"] == low, name
        if high is not None:
            assert _branch(prop, "maximum")["maximum"] == high, name
    return schema


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that does not print access logs or client disconnects."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_body(
        self,
        status: int,
        body: bytes,
        content_type: str = "text/plain; charset=utf-8",
        **headers: str,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        if self.command != "HEAD":
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up early (body caps, timeouts) is expected here


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """A real HTTP server on 127.0.0.1 (ephemeral port) for the duration of the block."""
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
