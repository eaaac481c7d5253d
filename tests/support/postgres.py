"""A PostgreSQL server of the suite's own: ``initdb`` and the server into a temp dir, on loopback.

The `postgres` fixture (session-wide) creates a cluster in a fresh temp dir (``initdb``), starts
its server on a free loopback port with its unix socket in that dir, and stops it and removes the
dir at the end of the session. Each test gets a database of its own (`pg_url`, or
`Postgres.fresh_database()`), so tests never see each other's rows. ``initdb`` is found on PATH,
else under ``/usr/lib/postgresql/*/bin`` (Debian's ``postgresql`` package; ``.ci/run`` installs
it), and the server beside it.

``initdb`` refuses to run as root: as root (CI), the cluster belongs to the ``postgres`` user that
Debian's package creates, and ``initdb`` and the server run through ``runuser -u postgres``. A
server that cannot be started FAILS the tests that need it, never skips them: the replicas are
part of the product, and a missing engine is a broken set-up, not an optional feature.

`database_url` parametrizes a test over both engines: None (the embedded SQLite store in the
data dir) and a fresh PostgreSQL database.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.support.sockets import free_port
from tests.support.waiting import wait_for

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
    with running_postgres() as cluster:
        yield cluster


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A PostgreSQL server in a temp dir until the block ends (the benchmarks use it too)."""
    initdb = os.path.realpath(pg_binary("initdb"))
    server = os.path.join(os.path.dirname(initdb), "postgres")  # the same version's server
    owner = _owner()
    # Not under pytest's tmp dir: it is private to this user, and the server may run as another.
    root = Path(tempfile.mkdtemp(prefix="ongrid-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if owner is not None:
        info = pwd.getpwnam(owner)
        for path in (root, sockets):
            os.chown(path, info.pw_uid, info.pw_gid)
    user = owner or pwd.getpwuid(os.geteuid()).pw_name
    port = free_port()
    proc: subprocess.Popen[bytes] | None = None
    try:
        init = [initdb, "-D", str(data), "-U", user, "-A", "trust", "-E", "UTF8"]
        _run([*init, "--locale=C", "--no-sync", "--no-instructions"], owner, "initdb")
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(sockets),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "300",
        }
        options = [arg for k, v in settings.items() for arg in ("-c", f"{k}={v}")]
        # The server runs as a child in this process's session, not daemonized by pg_ctl (which
        # gives it a session of its own): a test process that made itself a child subreaper
        # (the manager's orphan sweeper) would adopt a daemon and kill it as a skill's orphan.
        with (root / "server.log").open("wb") as log:
            proc = subprocess.Popen(
                _as_owner([server, "-D", str(data), *options], owner),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        cluster = Postgres(root, port, user, itertools.count(1))
        wait_for(lambda: _accepts(cluster, proc), "the PostgreSQL server to start", START_TIMEOUT)
        yield cluster
    finally:
        if proc is not None:
            _stop(proc, data)
        shutil.rmtree(root, ignore_errors=True)


def _accepts(cluster: Postgres, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        log = (cluster.root / "server.log").read_text(errors="replace")
        pytest.fail(f"the PostgreSQL server exited with {proc.returncode}:\n{log}")
    try:
        psycopg.connect(cluster.dsn(), connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def _stop(proc: subprocess.Popen[bytes], data: Path) -> None:
    """Immediate shutdown (SIGQUIT to the postmaster, whose pid heads postmaster.pid)."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = proc.pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGQUIT)
    try:
        proc.wait(timeout=START_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        proc.wait()


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
