"""Network namespaces for the fleet tests: hosts that reach the bus across a real network.

:func:`network` creates network namespaces (``ip netns``), each joined to the root namespace by a
veth pair on a /30 of its own (the root side ``.1`` is the namespace's default gateway, the
namespace side ``.2`` is its address), inside one private 10.x.y.0/24 chosen free at random. The
bus address is the root side of the first pair: a NATS server bound there is reachable from every
namespace through that namespace's own link, and from nowhere on loopback. A namespace's link can
be cut (:meth:`Namespace.cut`: its side set down, as a cable pulled on the host) and mended.

Names are unique per run (``ongrid-<pid>-<tag>-<n>``, interfaces ``og<tag><n>o|i``), so parallel
or crashed runs never collide; everything is deleted when the block ends, after a failure too, and
the leftovers of a run that was killed (its pid gone, older than :data:`STALE_SECONDS`) are
deleted by the next one.

`netns_fleet` (a fixture) is a :class:`~tests.support.fleet.Fleet` on a NATS server of its own
bound to the bus address, with two namespaces to start workers in. Without ``ip netns`` (not
root, no CAP_NET_ADMIN/CAP_SYS_ADMIN, no ``ip``) it SKIPS, saying why, except where ``CI`` is set
and the process is root: CI has it, so there it FAILS.

It never touches an interface, route or namespace it did not create (or a dead run of it).
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import random
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fleet import Fleet, WorkerProcess, fleet_on
from tests.support.nats import NatsServer, running_nats
from tests.support.processes import alive

IP_CANDIDATES = ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip")
NETNS_DIR = Path("/run/netns")
NAME_RE = re.compile(r"ongrid-(\d+)-([0-9a-f]{6})-(\d)")
#: A namespace of a dead run is deleted once it is this old (a pid can be reused meanwhile).
STALE_SECONDS = 600
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21
MAX_NAMESPACES = 10  # one digit in the names; 4 addresses each in the /24


def ip_binary() -> str | None:
    found = shutil.which("ip")
    if found:
        return found
    return next((path for path in IP_CANDIDATES if os.access(path, os.X_OK)), None)


def ip(*args: str) -> str:
    """Run ``ip ARGS`` (stdout); a failure raises with ip's own message."""
    binary = ip_binary()
    assert binary is not None, "no ip command"
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=15)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _capabilities() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


@functools.cache
def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None (probed once per session)."""
    if ip_binary() is None:
        return "no `ip` command (install iproute2)"
    caps = _capabilities()
    if not (caps >> CAP_NET_ADMIN) & 1 or not (caps >> CAP_SYS_ADMIN) & 1:
        return f"`ip netns` needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root); uid {os.geteuid()}"
    probe = f"ongrid-probe-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        ip("netns", "add", probe)
    except RuntimeError as exc:
        return f"`ip netns add` fails here: {exc}"
    with contextlib.suppress(RuntimeError):
        ip("netns", "del", probe)
    return None


def require_netns() -> None:
    """Skip the calling test when namespaces cannot be made, saying why; fail instead in CI as
    root, which has them (a skip there would hide a broken set-up)."""
    why = unavailable()
    if why is None:
        return
    if os.environ.get("CI") and os.geteuid() == 0:
        pytest.fail(f"network namespaces are required in CI (CI is set, running as root): {why}")
    pytest.skip(f"network namespaces unavailable: {why}")


@dataclass(frozen=True)
class Namespace:
    """One namespace: a host of its own on the test network."""

    name: str
    inside: str  # its side of the veth pair
    outside: str  # the root namespace's side
    address: str  # of the inside
    gateway: str  # of the outside: the namespace's default route

    @property
    def command(self) -> list[str]:
        """The prefix that runs a command in this namespace (``ip`` execs it: same pid)."""
        return [ip_binary() or "ip", "netns", "exec", self.name]

    def cut(self) -> None:
        """Pull the cable: this namespace's side of the link down (its routes go with it)."""
        ip("-n", self.name, "link", "set", self.inside, "down")

    def mend(self) -> None:
        """Plug it back: the link up again and the default route restored."""
        ip("-n", self.name, "link", "set", self.inside, "up")
        ip("-n", self.name, "route", "replace", "default", "via", self.gateway)


@dataclass(frozen=True)
class Network:
    """The namespaces of one run, and the address a server for all of them binds to."""

    namespaces: list[Namespace]

    @property
    def bus(self) -> str:
        return self.namespaces[0].gateway


def _used_networks() -> list[ipaddress.IPv4Network]:
    used = [
        ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}").network
        for link in json.loads(ip("-j", "-4", "addr", "show") or "[]")
        for a in link.get("addr_info", [])
    ]
    for route in json.loads(ip("-j", "-4", "route", "show") or "[]"):
        if route.get("dst", "default") != "default":
            used.append(ipaddress.IPv4Network(route["dst"], strict=False))
    return used


def _free_block() -> ipaddress.IPv4Network:
    used = _used_networks()
    for _ in range(100):
        block = ipaddress.IPv4Network(
            f"10.{random.randint(100, 254)}.{random.randint(0, 255)}.0/24"
        )
        if not any(block.overlaps(other) for other in used):
            return block
    raise RuntimeError("no free 10.x.y.0/24 for the test network")


def reap_stale(older_than: float = STALE_SECONDS) -> None:
    """Delete what runs that died left behind (their namespaces, and with them their links)."""
    with contextlib.suppress(OSError):
        for entry in NETNS_DIR.iterdir():
            found = NAME_RE.fullmatch(entry.name)
            if found is None or alive(int(found[1])):
                continue
            with contextlib.suppress(OSError):
                if time.time() - entry.lstat().st_mtime < older_than:
                    continue
            with contextlib.suppress(RuntimeError):
                ip("link", "del", f"og{found[2]}{found[3]}o")
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", entry.name)


def _delete(ns: Namespace) -> None:
    # Deleting the namespace deletes its veth pair once no process is left in it; deleting the
    # root side first frees its addresses at once, even while a process is left behind.
    with contextlib.suppress(RuntimeError):
        ip("link", "del", ns.outside)
    with contextlib.suppress(RuntimeError):
        ip("netns", "del", ns.name)


@contextmanager
def network(count: int = 2) -> Iterator[Network]:
    """``count`` namespaces linked to the root namespace, until the block ends."""
    assert 1 <= count <= MAX_NAMESPACES
    reap_stale()
    tag = secrets.token_hex(3)
    hosts = list(_free_block().hosts())
    made: list[Namespace] = []
    try:
        for n in range(count):
            ns = Namespace(
                name=f"ongrid-{os.getpid()}-{tag}-{n}",
                inside=f"og{tag}{n}i",
                outside=f"og{tag}{n}o",
                address=str(hosts[4 * n + 1]),
                gateway=str(hosts[4 * n]),
            )
            ip("netns", "add", ns.name)
            made.append(ns)
            ip("link", "add", ns.outside, "type", "veth", "peer", "name", ns.inside,
               "netns", ns.name)  # fmt: skip
            ip("addr", "add", f"{ns.gateway}/30", "dev", ns.outside)
            ip("link", "set", ns.outside, "up")
            ip("-n", ns.name, "addr", "add", f"{ns.address}/30", "dev", ns.inside)
            ip("-n", ns.name, "link", "set", "lo", "up")
            ns.mend()
        yield Network(made)
    finally:
        for ns in made:
            _delete(ns)


@dataclass
class NetnsFleet:
    """A fleet whose bus is across the network from its workers' namespaces."""

    fleet: Fleet
    network: Network

    @property
    def nats(self) -> NatsServer:
        return self.fleet.nats

    def worker(self, n: int, host: str, skills: Path, **env: str) -> WorkerProcess:
        """Start worker ``host`` in namespace ``n`` (it reaches the bus through its link)."""
        inside = self.network.namespaces[n].command
        return self.fleet.worker(host, skills, wait=True, inside=inside, **env)


@pytest.fixture
def netns_fleet(tmp_path: Path, fleet_prefix: str) -> Iterator[NetnsFleet]:
    """Two namespaces, a NATS server on the bus address (monitored), and this test's fleet on
    it; workers stopped, server stopped, namespaces deleted at the end, in that order."""
    require_netns()
    with (
        network(2) as net,
        running_nats(host=net.bus, monitor=True) as server,
        fleet_on(tmp_path, server, fleet_prefix) as fleet,
    ):
        yield NetnsFleet(fleet, net)
