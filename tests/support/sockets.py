"""Loopback sockets: a free port, and a listener whose accept queue is full (a connect to it hangs
exactly like one to a firewalled port)."""

from __future__ import annotations

import select
import socket
import time

import pytest


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill_backlog(server: socket.socket, timeout: float = 5.0) -> list[socket.socket]:
    """Connect to ``server`` (listening, never accepting) until one connection stays pending:
    the accept queue is then full and further SYNs are dropped, which a client sees as a timeout.
    Returns the connections, for the caller to close."""
    port = server.getsockname()[1]
    clients: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        clients.append(client)
        # A connection completes at once on loopback unless the queue is full: waiting on it
        # with a deadline tells which.
        _, writable, _ = select.select([], [client], [], 0.2)
        if not writable:
            return clients
    for client in clients:
        client.close()
    pytest.fail("could not fill the listen backlog")
