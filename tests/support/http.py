"""Plain HTTP servers on loopback for the built-ins and the scripted LLM to talk to: the standard
library's threading server on an ephemeral port, quiet about access logs and clients that hang
up early, run in a thread for the duration of a ``with`` block."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


class LoopbackHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up early (body caps, timeouts, a killed manager) is expected


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[LoopbackHTTPServer]:
    """A real HTTP server on 127.0.0.1 (ephemeral port) for the duration of the block."""
    server = LoopbackHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
