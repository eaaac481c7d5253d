"""Which network targets the probes may reach, and whose HTTP bodies they may return.

A target is a host as the caller wrote it (a name or an address) and every address it resolves
to. Rules, in order (docs/security.md):

1. **Always denied**: link-local (``169.254.0.0/16``, ``fe80::/10``, where every cloud serves its
   instance metadata), the other known metadata addresses and names, and the unspecified
   addresses (``0.0.0.0``, ``::``, which reach the host itself). Not even the allow list lifts it.
2. **Denied by the operator**: ``builtin_net_deny`` (CIDRs, addresses, names, ``*.domain``).
3. **Allow list**: when ``builtin_net_allow`` is set, a target is reached only when its name or
   each of its addresses is listed. Unset (the default), anything not denied is reached —
   loopback and private networks included: they are where the services an operator probes live.

IPv4 addresses hidden in IPv6 ones (``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4) are checked
as themselves too. The caller connects to exactly the addresses it checked: never resolve again
between the check and the connect (that gap is what DNS rebinding uses).

>>> rules = NetRules.parse(deny=["10.9.0.0/16", "*.corp.example"])
>>> rules.refusal("169.254.169.254", ip_address("169.254.169.254")) is not None
True
>>> rules.refusal("x", ip_address("::ffff:169.254.169.254")) is not None
True
>>> rules.refusal("db.corp.example", ip_address("192.0.2.7")) is not None
True
>>> rules.refusal("localhost", ip_address("127.0.0.1")) is None
True
>>> NetRules.parse(allow=["192.0.2.0/24"]).refusal("x", ip_address("198.51.100.1")) is not None
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

from ongrid_skills.builtins.failures import ForbiddenTarget
from ongrid_skills.errors import ConfigError

__all__ = [
    "ALWAYS_DENIED",
    "Address",
    "NetRules",
    "TargetList",
    "parse_address",
]

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

#: Never reachable by a built-in, whatever the settings.
ALWAYS_DENIED = (
    "169.254.0.0/16",  # IPv4 link-local: AWS, GCP, Azure, OpenStack… metadata at 169.254.169.254
    "fe80::/10",  # IPv6 link-local
    "fd00:ec2::254",  # AWS instance metadata over IPv6
    "100.100.100.200",  # Alibaba Cloud metadata
    "168.63.129.16",  # Azure WireServer
    "192.0.0.192",  # Oracle Cloud metadata (legacy address)
    "0.0.0.0/8",  # unspecified: a connect to it reaches the host itself
    "::/128",
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
)

_HOST_RE = re.compile(r"^(\*\.)?[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")
_NAT64 = ip_network("64:ff9b::/96")


def _normal_name(name: str) -> str:
    return name.strip().lower().rstrip(".")


def parse_address(text: str) -> Address | None:
    """An IP address written as such (IPv6 brackets and a ``%zone`` allowed), else None."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.split("%", 1)[0]
    try:
        return ip_address(text)
    except ValueError:
        return None


def _forms(address: Address) -> list[Address]:
    """The address and every IPv4 address it embeds."""
    forms: list[Address] = [address]
    if isinstance(address, IPv6Address):
        for embedded in (address.ipv4_mapped, address.sixtofour):
            if embedded is not None:
                forms.append(embedded)
        if address in _NAT64:
            forms.append(IPv4Address(int(address) & 0xFFFFFFFF))
    return forms


@dataclass(frozen=True, slots=True)
class TargetList:
    """CIDR blocks and host-name patterns (``name`` or ``*.domain``, which also matches the
    bare ``domain``); empty matches nothing."""

    networks: tuple[Network, ...] = ()
    hosts: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str], setting: str) -> TargetList:
        networks: list[Network] = []
        hosts: list[str] = []
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            address = parse_address(entry)
            if address is not None:
                networks.append(ip_network(address))
                continue
            try:
                networks.append(ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            name = _normal_name(entry)
            if not _HOST_RE.fullmatch(name):
                raise ConfigError(
                    f"{setting}: {raw!r} is neither a CIDR, an address nor a host name"
                )
            hosts.append(name)
        return cls(tuple(networks), tuple(hosts))

    def __bool__(self) -> bool:
        return bool(self.networks or self.hosts)

    def has_name(self, name: str | None) -> bool:
        if not name or parse_address(name) is not None:
            return False
        name = _normal_name(name)
        for pattern in self.hosts:
            if pattern.startswith("*."):
                domain = pattern[2:]
                if name == domain or name.endswith("." + domain):
                    return True
            elif name == pattern:
                return True
        return False

    def has_address(self, address: Address) -> bool:
        return any(
            form in network
            for form in _forms(address)
            for network in self.networks
            if form.version == network.version
        )

    def matches(self, name: str | None, address: Address | None) -> bool:
        return self.has_name(name) or (address is not None and self.has_address(address))


_ALWAYS = TargetList.parse(ALWAYS_DENIED, "built-in deny list")


@dataclass(frozen=True, slots=True)
class NetRules:
    """The operator's rules for the probes; the default denies only :data:`ALWAYS_DENIED`."""

    allow: TargetList = field(default_factory=TargetList)
    deny: TargetList = field(default_factory=TargetList)
    body_allow: TargetList = field(default_factory=TargetList)

    @classmethod
    def parse(
        cls,
        *,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        body_allow: Iterable[str] = (),
    ) -> NetRules:
        """Rules from the settings' lists; a malformed entry is a ConfigError."""
        return cls(
            TargetList.parse(allow, "builtin_net_allow"),
            TargetList.parse(deny, "builtin_net_deny"),
            TargetList.parse(body_allow, "builtin_http_body_allow"),
        )

    def name_refusal(self, name: str) -> str | None:
        """Why a name is refused before it is even resolved (a denied name), or None."""
        if _ALWAYS.has_name(name):
            return "a cloud metadata name, never reachable by built-ins"
        if self.deny.has_name(name):
            return "listed in builtin_net_deny"
        return None

    def refusal(self, name: str | None, address: Address) -> str | None:
        """Why ``address`` (resolved from ``name``) is refused, or None when it may be reached."""
        if _ALWAYS.matches(name, address):
            return "a link-local, cloud metadata or unspecified address, never reachable"
        if self.deny.matches(name, address):
            return "listed in builtin_net_deny"
        if self.allow and not self.allow.matches(name, address):
            return "not listed in builtin_net_allow"
        return None

    def check(self, name: str, addresses: Iterable[str]) -> None:
        """Raise ForbiddenTarget unless the name and *every* resolved address may be reached
        (an address that does not even parse is refused: it could not be checked)."""
        why = self.name_refusal(name)
        if why is not None:
            raise ForbiddenTarget(f"{name} is refused: {why}")
        for text in addresses:
            address = parse_address(text)
            if address is None:
                raise ForbiddenTarget(f"{name} resolved to {text!r}, which cannot be checked")
            why = self.refusal(name, address)
            if why is not None:
                shown = name if name == str(address) else f"{name} ({address})"
                raise ForbiddenTarget(f"{shown} is refused: {why}")

    def body_allowed(self, name: str | None, address: Address | None) -> bool:
        """Whether probe_http may return the body of an answer from this target."""
        return self.body_allow.matches(name, address)
