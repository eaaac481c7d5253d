"""The uvicorn server ``serve`` runs: an orderly stop on SIGTERM/SIGINT ends with status 0, and
the HTTP parser it speaks, httptools with a bound on the request head, and whose proxy headers
it believes.

uvicorn re-raises the signal it caught once it has shut down gracefully, so a supervisor
(systemd, make) would see death by SIGTERM (status 143) for what was an orderly stop. Imported
only by ``serve`` (uvicorn is not needed by other commands). It must not open the store or
build the app: ``serve`` hands it a config.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def proxy_options(trusted_proxies: tuple[str, ...]) -> dict[str, Any]:
    """uvicorn's proxy-header options for ``ONGRID_TRUSTED_PROXIES``: X-Forwarded-For and
    X-Forwarded-Proto are read only from those peers (the client is then the right-most address
    of the chain that is not one of them), and from no peer when there are none. uvicorn's own
    default trusts 127.0.0.1 and ``$FORWARDED_ALLOW_IPS``: any local process could make up its
    address (and reset its login throttle), so that default is never left in place."""
    return {"proxy_headers": bool(trusted_proxies), "forwarded_allow_ips": list(trusted_proxies)}


class GracefulServer(uvicorn.Server):
    """uvicorn's server; ``stopped_by`` names the signal that stopped it (None otherwise)."""

    stopped_by: int | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self._stop) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, sig: int, _frame: FrameType | None) -> None:
        self.stopped_by = sig
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: do not wait for open connections
        self.should_exit = True


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol (llhttp, in C: a fraction of the h11 parser's CPU per
    request), refusing a request head larger than the config's ``h11_max_incomplete_event_size``
    with the 400 uvicorn answers any unparsable request with, and closing the connection.

    Why: httptools puts no bound on the head. It gathers a header, or a URL, until it ends, so a
    client sending megabytes of one header would grow the server's memory without limit. Two
    counts, both reset when a request begins: the URL and headers parsed so far (so a head over
    the bound is refused however it was split into reads), and the bytes of every read that left
    the parser inside a head (so a header that never ends is refused once it passes the bound:
    the memory a head can take is the bound plus one read). The body is not counted (the REST
    door's body limit is for it).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_limit: int = self.config.h11_max_incomplete_event_size or DEFAULT_HEAD_LIMIT
        self.in_head = False
        self.parsed = 0  # URL and header bytes of the request being read
        self.unparsed = 0  # bytes of the reads that ended inside its head

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.in_head = True
        self.parsed = self.unparsed = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.in_head = False
        super().on_headers_complete()

    def _count(self, size: int) -> None:
        self.parsed += size
        if self.parsed > self.head_limit:
            # Raised in a parser callback: feed_data stops and raises HttpParserCallbackError,
            # which uvicorn's data_received answers with 400 (and closes the connection).
            raise httptools.HttpParserError(f"request head over {self.head_limit} bytes")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.in_head and not self.transport.is_closing():
            self.unparsed += len(data)
            if self.unparsed > self.head_limit:
                self.in_head = False
                self.logger.warning("Invalid HTTP request received: head over the limit.")
                self.send_400_response("Invalid HTTP request received.")


#: h11's own default bound (16 KiB) when a config names none.
DEFAULT_HEAD_LIMIT = 16 * 1024
