"""A NATS server of the suite's own: ``nats-server -js`` on a free loopback port, a temp store.

`nats_server` (session-wide) starts one for the whole session; :func:`running_nats` starts a
private one (a test that restarts or kills its server must not disturb the others). Tests share
the session server by giving each fleet its own prefix (`fleet_prefix`): subjects, streams and
the hosts bucket are all named from it. The binary is Debian's ``nats-server`` (in /usr/sbin;
``.ci/run`` installs the package). A server that cannot start FAILS the tests that need it,
never skips them: the edge workers are part of the product.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

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
    proc: subprocess.Popen[bytes] | None = None
    starts: int = field(default=0)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def start(self) -> None:
        argv = [
            nats_binary(),
            "-js",
            "-a", "127.0.0.1",
            "-p", str(self.port),
            "-sd", str(self.root / "store"),
            "-n", f"ongrid-test-{self.port}",
        ]  # fmt: skip
        if self.config is not None:
            path = self.root / "server.conf"
            path.write_text(self.config)
            argv += ["-c", str(path)]
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
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

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
def running_nats(config: str | None = None) -> Iterator[NatsServer]:
    """A NATS server with JetStream in a temp dir until the block ends (benchmarks use it);
    ``config``: the text of a configuration file for it (authorization, TLS…)."""
    root = Path(tempfile.mkdtemp(prefix="ongrid-nats-"))
    server = NatsServer(root, free_port(), config)
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
