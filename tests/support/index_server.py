"""A marketplace on loopback that a test controls: a real HTTP server handing out an index and
pack files by path, and recording every request it gets (its path, and whether it carried
credentials), so a test can say what was fetched, and what never was.

Serve hostile entries through it: an index is bytes like any file, nothing here checks them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.http import LoopbackHTTPServer, QuietHandler, serve


@dataclass(frozen=True)
class Seen:
    """One request the server got."""

    path: str
    credentials: bool  # an Authorization header (a URL's user:password@ becomes one)


@dataclass
class IndexServer:
    """``files`` (by path, changed at will while it runs) and the ``requests`` it got."""

    server: LoopbackHTTPServer
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]

    def publish(self, path: str, packs: list[dict[str, Any]]) -> str:
        """Serve an index listing ``packs`` (entries as given, hostile or not) at ``path``;
        returns its URL."""
        body = {"format": "ongrid-pack-index v1", "packs": packs}
        self.files[path] = json.dumps(body, indent=2).encode()
        return self.url(path)


@contextlib.contextmanager
def index_server() -> Iterator[IndexServer]:
    """A marketplace server on 127.0.0.1 (ephemeral port) for the duration of the block."""
    files: dict[str, bytes] = {}
    requests: list[Seen] = []

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            requests.append(Seen(path, "Authorization" in self.headers))
            body = files.get(path)
            if body is None:
                self.send_body(404, b"not here")
            else:
                self.send_body(200, body, "application/octet-stream")

    with serve(Handler) as running:
        yield IndexServer(running, files, requests)
