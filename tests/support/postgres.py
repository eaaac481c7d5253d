"""A PostgreSQL server of the suite's own: ``initdb`` + ``pg_ctl`` into a temp dir, on loopback.

The `postgres` fixture (session-wide) creates a cluster in a fresh temp dir, starts it on a free
loopback port with its unix socket in that dir, and stops and removes it at the end of the
session. Each test gets a database of its own (`pg_url`, or `Postgres.fresh_database()`), so
tests never see each other's rows. The binaries are found on PATH, else under
``/usr/lib/postgresql/*/bin`` (Debian's ``postgresql`` package; ``.ci/run`` installs it).

``initdb`` refuses to run as root: as root (CI), the cluster belongs to the ``postgres`` user that
Debian's package creates, and every server command runs through ``runuser -u postgres``. A server
that cannot be started FAILS the tests that need it, never skips them: the replicas are part of
the product, and a missing engine is a broken set-up, not an optional feature.

`database_url` parametrizes a test over both engines: None (the embedded SQLite store in the
data dir) and a fresh PostgreSQL database.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.support.sockets import free_port

SERVER_OWNER_WHEN_ROOT = "postgres"
START_TIMEOUT = 60


def pg_binary(name: str) -> str:
    """The path of a PostgreSQL server program (PATH first, then the newest Debian version)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda path: int(Path(path).parent.parent.name or 0),
        reverse=True,
    )
    if not candidates:
        pytest.fail(
            f"PostgreSQL's {name} is neither on PATH nor under /usr/lib/postgresql/*/bin: "
            "install the server (apt-get install postgresql; .ci/run does it)"
        )
    return candidates[0]


@dataclass
class Postgres:
    """A running cluster: its superuser and port, and fresh databases on demand."""

    root: Path
    port: int
    user: str
    _names: Iterator[int]

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` (psycopg 3, TCP on loopback, trust auth)."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        """The libpq connection string of ``database``."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={database}"

    def fresh_database(self) -> str:
        """Create an empty database and return its URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _as_owner(argv: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *argv] if owner else argv


def _run(argv: list[str], owner: str | None, what: str) -> None:
    done = subprocess.run(
        _as_owner(argv, owner), capture_output=True, text=True, timeout=START_TIMEOUT
    )
    if done.returncode != 0:
        pytest.fail(f"{what} failed ({done.returncode}): {done.stdout}{done.stderr}")


def _owner() -> str | None:
    """Who runs the server: this user, or (as root, which initdb refuses) ``postgres``."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_OWNER_WHEN_ROOT)
    except KeyError:
        pytest.fail(
            "running as root, and there is no postgres user to run the PostgreSQL server as "
            "(initdb refuses root): install Debian's postgresql package, which creates it"
        )
    return SERVER_OWNER_WHEN_ROOT


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL server for the session: started here, stopped and removed at the end."""
    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    owner = _owner()
    # Not under pytest's tmp dir: it is private to this user, and the server may run as another.
    root = Path(tempfile.mkdtemp(prefix="ongrid-pg-"))
    data, sockets, log = root / "data", root / "sockets", root / "server.log"
    sockets.mkdir()
    if owner is not None:
        info = pwd.getpwnam(owner)
        for path in (root, sockets):
            os.chown(path, info.pw_uid, info.pw_gid)
    user = owner or pwd.getpwuid(os.geteuid()).pw_name
    port = free_port()
    started = False
    try:
        init = [initdb, "-D", str(data), "-U", user, "-A", "trust", "-E", "UTF8"]
        _run([*init, "--locale=C", "--no-sync", "--no-instructions"], owner, "initdb")
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={sockets}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c max_connections=300"
        )
        start = [pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", str(START_TIMEOUT)]
        _run([*start, "-o", options, "start"], owner, f"pg_ctl start (log: {log})")
        started = True
        yield Postgres(root, port, user, itertools.count(1))
    finally:
        if started:
            subprocess.run(
                _as_owner([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], owner),
                capture_output=True,
                timeout=START_TIMEOUT,
                check=False,
            )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(postgres: Postgres) -> str:
    """The URL of an empty PostgreSQL database of this test's own."""
    return postgres.fresh_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """Each engine in turn: None (the embedded SQLite store), then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    cluster: Postgres = request.getfixturevalue("postgres")
    return cluster.fresh_database()
