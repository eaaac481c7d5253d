"""A TCP proxy on loopback that breaks connections on purpose: what a flaky network, a proxy
timing out, or a load balancer draining does to a long-lived stream.

Each connection is forwarded both ways byte for byte. :meth:`Proxy.cut_after` arms a one-time
cut: the first answer (server → client) that carries the marker is forwarded, then both sockets
are closed (and, ``for_good``, the proxy stops accepting: the server is gone as far as clients
can tell). :meth:`Proxy.close` stops accepting: every later connection is refused.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Proxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self.cuts = 0
        self._marker: bytes | None = None
        self._for_good = False
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut_after(self, marker: bytes, *, for_good: bool = False) -> None:
        """Close the connection whose answer first carries ``marker``, once it was forwarded;
        ``for_good``: accept no connection after it."""
        with self._lock:
            self._marker = marker
            self._for_good = for_good

    def close(self) -> None:
        """Stop accepting and close every connection: the server is gone, as far as clients go."""
        _close(self.listener)  # shut down first: a bare close leaves a blocked accept() accepting
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            _close(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self.connections += 1
                self._open.update((client, upstream))
            pair = (client, upstream)
            threading.Thread(
                target=self._pump, args=(client, upstream, pair, False), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, pair, True), daemon=True
            ).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        pair: tuple[socket.socket, socket.socket],
        answers: bool,
    ) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
                if answers and self._should_cut(chunk):
                    if self._for_good:
                        self.close()
                    break
        except OSError:
            pass
        for sock in pair:
            _close(sock)

    def _should_cut(self, chunk: bytes) -> bool:
        with self._lock:
            if self._marker is not None and self._marker in chunk:
                self._marker = None
                self.cuts += 1
                return True
        return False


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@contextmanager
def proxy_to(port: int) -> Iterator[Proxy]:
    """A :class:`Proxy` to ``127.0.0.1:port`` for the duration of the block."""
    proxy = Proxy(port)
    try:
        yield proxy
    finally:
        proxy.close()
