"""A NATS server of the suite's own: ``nats-server -js`` on a free port, a temp store.

`nats_server` (session-wide) starts one for the whole session; :func:`running_nats` starts a
private one (a test that restarts or kills its server must not disturb the others). Tests share
the session server by giving each fleet its own prefix (`fleet_prefix`): subjects, streams and
the hosts bucket are all named from it. A server listens on loopback unless told another address
(the network-namespace tests bind theirs to a veth's: :mod:`tests.support.netns`). The binary is
Debian's ``nats-server`` (in /usr/sbin; ``.ci/run`` installs the package). A server that cannot
start FAILS the tests that need it, never skips them: the edge workers are part of the product.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.sockets import free_port
from tests.support.waiting import wait_for

START_TIMEOUT = 30
CANDIDATES = ("/usr/sbin/nats-server", "/usr/bin/nats-server")


def nats_binary() -> str:
    found = shutil.which("nats-server")
    if found:
        return found
    for path in CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    pytest.fail(
        "nats-server is neither on PATH nor in /usr/sbin: install it "
        "(apt-get install nats-server; .ci/run does it)"
    )


@dataclass
class NatsServer:
    """A running ``nats-server -js``; :meth:`restart` keeps its port and its store."""

    root: Path
    port: int
    config: str | None = None  # a nats-server configuration file's text (authorization…)
    host: str = "127.0.0.1"  # the address it listens on
    monitor_port: int | None = None  # its HTTP monitoring port (on ``host``), when wanted
    proc: subprocess.Popen[bytes] | None = None
    starts: int = field(default=0)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def start(self) -> None:
        argv = [
            nats_binary(),
            "-js",
            "-a", self.host,
            "-p", str(self.port),
            "-sd", str(self.root / "store"),
            "-n", f"ongrid-test-{self.port}",
        ]  # fmt: skip
        if self.config is not None:
            path = self.root / "server.conf"
            path.write_text(self.config)
            argv += ["-c", str(path)]
        if self.monitor_port is not None:
            argv += ["-m", str(self.monitor_port)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.starts += 1
        wait_for(self._ready, "the NATS server to accept connections", START_TIMEOUT)

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"nats-server exited with {self.proc.returncode}:\n{self.log.read_text()}")
        if self.log.read_text(errors="replace").count("Server is ready") < self.starts:
            return False
        with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), 1):
            return True
        return False

    def connections(self) -> list[dict[str, Any]]:
        """The server's client connections as its monitoring endpoint lists them (``/connz``:
        each with the ``ip`` and ``port`` it comes from and the ``name`` the client gave)."""
        assert self.monitor_port is not None, "started without a monitoring port"
        url = f"http://{self.host}:{self.monitor_port}/connz"
        with urllib.request.urlopen(url, timeout=5) as response:
            found: list[dict[str, Any]] = json.load(response).get("connections") or []
        return found

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        """Stop the server (its clients lose their connections) and start it again."""
        self.stop()
        self.start()


@contextmanager
def running_nats(
    config: str | None = None, host: str = "127.0.0.1", monitor: bool = False
) -> Iterator[NatsServer]:
    """A NATS server with JetStream in a temp dir until the block ends (benchmarks use it);
    ``config``: the text of a configuration file for it (authorization, TLS…); ``host``: the
    address it listens on; ``monitor``: with its HTTP monitoring endpoint too."""
    root = Path(tempfile.mkdtemp(prefix="ongrid-nats-"))
    # A port free on loopback is free on the other addresses too (a wildcard bind would hold it).
    server = NatsServer(root, free_port(), config, host, free_port() if monitor else None)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """The session's NATS server."""
    with running_nats() as server:
        yield server


@pytest.fixture
def fleet_prefix() -> str:
    """A prefix of this test's own: its subjects, streams and bucket are its alone."""
    return "t" + uuid.uuid4().hex[:12]
