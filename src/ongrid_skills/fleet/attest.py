"""Signed inventories: each worker's own Ed25519 key, the entry it signs, and the manager's check.

What a party able to write the hosts bucket must not achieve is changing what a skill *is* for
the manager: its class, its schema, whether it needs a confirmation, where it may run. So a
worker signs its inventory with a key of its own and the manager believes an entry only when a
key it trusts *for that host id* signed exactly its bytes:

- The worker's key lives in ``$ONGRID_DATA_DIR/worker.key`` (OpenSSH private key format, mode
  0600, created on first use like the manager's ``fleet.key``; refused, like the audit key, when
  group or others may read it). ``ongrid-skills worker --print-key`` prints the line the managers
  need: ``<host id> ssh-ed25519 AAAA… ongrid-worker@<hostname>``.
- An entry of the bucket is JSON ``{"inventory": "<the inventory's JSON text>", "key":
  "SHA256:…", "signature": "<base64>"}``; the signature covers a domain prefix and the
  inventory's exact bytes (UTF-8).
- A manager trusts the keys of ``ONGRID_FLEET_WORKER_KEYS``: a file of ``<host id> ssh-ed25519
  AAAA… comment`` lines (``#`` comments and blank lines skipped; several lines may name one host,
  for a key rotation). A key is trusted for the host ids its lines name, and for no other.

:func:`open_entry` says what is wrong with an entry (unsigned, no key trusted for the host,
signed by another key, a bad signature), or nothing. It never decides what an unverified entry
means for the catalogue (:mod:`.catalogue` does: shown as such, never offered). This module never
logs or returns private key material.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature

from ongrid_skills.errors import PackKeyError
from ongrid_skills.fleet.bus import host_id_problem
from ongrid_skills.fleet.signing import create_key
from ongrid_skills.packs.keys import (
    SigningKey,
    TrustedKey,
    decode_base64,
    fingerprint,
    load_signing_key,
    parse_openssh_public,
    read_key_file,
)
from ongrid_skills.settings import Settings

LOG = logging.getLogger("ongrid_skills.fleet")
WORKER_KEY_NAME = "worker.key"
DOMAIN = b"ongrid-skills fleet inventory v1\n"
KEYS_SETTING = "ONGRID_FLEET_WORKER_KEYS"


def worker_key_path(settings: Settings) -> str:
    return os.path.join(settings.data_dir, WORKER_KEY_NAME)


def worker_key(settings: Settings) -> SigningKey:
    """This worker's signing key, ``data_dir/worker.key``, created the first time."""
    path = worker_key_path(settings)
    if not os.path.exists(path):
        create_key(path)
    return load_signing_key(path, private="worker key file")


def key_line(host: str, key: SigningKey) -> str:
    """The line of ``ONGRID_FLEET_WORKER_KEYS`` that trusts this worker's key for ``host``."""
    return f"{host} {key.public_line} ongrid-worker@{socket.gethostname()}"


def seal(key: SigningKey, inventory: bytes) -> bytes:
    """The entry a worker puts in the hosts bucket: its inventory, signed."""
    signature = key.private.sign(DOMAIN + inventory)
    envelope = {
        "inventory": inventory.decode(),
        "key": key.fingerprint,
        "signature": base64.b64encode(signature).decode(),
    }
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class WorkerKeys:
    """The keys a manager trusts, by host id; ``configured``: the setting is set at all."""

    by_host: Mapping[str, tuple[TrustedKey, ...]] = field(default_factory=dict)
    configured: bool = False

    def for_host(self, host: str) -> tuple[TrustedKey, ...]:
        return self.by_host.get(host, ())


def parse_worker_keys(text: str, origin: str) -> WorkerKeys:
    """The keys of a ``host-id ssh-ed25519 AAAA… comment`` text; PackKeyError naming the first
    bad line (a trust file is read whole or not at all)."""
    found: dict[str, list[TrustedKey]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{origin}:{number}"
        host, _, rest = line.partition(" ")
        problem = host_id_problem(host)
        if host.startswith(("ssh-", "-----")):
            problem = "the line must start with the host id the key is trusted for"
        if problem is not None or not rest.strip():
            shown = problem or "no key after the host id"
            raise PackKeyError(f"{where}: expected 'host-id ssh-ed25519 AAAA… comment': {shown}")
        try:
            public = parse_openssh_public(rest.strip())
        except PackKeyError as exc:
            raise PackKeyError(f"{where}: {exc.message}") from None
        comment = " ".join(rest.split()[2:])
        found.setdefault(host, []).append(TrustedKey(fingerprint(public), public, comment, where))
    return WorkerKeys({h: tuple(keys) for h, keys in found.items()}, configured=True)


def load_worker_keys(path: str | None) -> WorkerKeys:
    """The file ``ONGRID_FLEET_WORKER_KEYS`` names (private to its owner, like every key file);
    none trusted when unset."""
    if not path:
        return WorkerKeys()
    raw = read_key_file(path, private="worker keys file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PackKeyError(f"{path}: not UTF-8 text") from None
    return parse_worker_keys(text, path)


@dataclass(frozen=True, slots=True)
class Opened:
    """An entry of the bucket: the inventory's bytes, and why it is not verified (or None)."""

    inventory: bytes
    problem: str | None


def open_entry(value: bytes, host: str, keys: WorkerKeys) -> Opened:
    """The inventory of the entry under the key ``host``, verified against the keys trusted for
    that host id (the inventory's own claims are checked by the caller)."""
    envelope = _envelope(value)
    if envelope is None:
        why = "unsigned: the entry carries no signature (forged, or a worker older than this one)"
        return Opened(value, why)
    inventory, claimed, signature_text = envelope
    trusted = keys.for_host(host)
    if not trusted:
        if not keys.configured:
            why = f"no worker key is trusted: {KEYS_SETTING} is not set"
        else:
            why = f"no key is trusted for host {host} in {KEYS_SETTING}"
        return Opened(inventory, why)
    try:
        signature = decode_base64(signature_text)
    except ValueError:
        return Opened(inventory, "bad signature: it is not base64")
    for candidate in trusted:
        try:
            candidate.key.verify(signature, DOMAIN + inventory)
        except InvalidSignature:
            continue
        return Opened(inventory, None)
    if all(k.fingerprint != claimed for k in trusted):
        shown = claimed[:60] if isinstance(claimed, str) else "?"
        return Opened(inventory, f"signed by {shown}, not a key trusted for host {host}")
    return Opened(inventory, "bad signature: the entry is not what the host's key signed")


def _envelope(value: bytes) -> tuple[bytes, str, str] | None:
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    inventory, claimed, signature = data.get("inventory"), data.get("key"), data.get("signature")
    if not all(isinstance(v, str) for v in (inventory, claimed, signature)):
        return None
    assert isinstance(inventory, str) and isinstance(claimed, str) and isinstance(signature, str)
    try:
        return inventory.encode(), claimed, signature
    except UnicodeEncodeError:  # a lone surrogate: not text a worker wrote
        return None


class KeysFile:
    """``ONGRID_FLEET_WORKER_KEYS`` as it is now: read at start (a file that cannot be used
    stops the manager), read again when it changes (a worker is trusted, or no longer, without
    a restart; a file that became unusable is logged and the previous keys stay)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._stamp = self._stat()
        self.keys = load_worker_keys(path)

    def _stat(self) -> tuple[int, int, int] | None:
        if not self.path:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def refresh(self) -> bool:
        """Read the file again if it changed since it was read; whether the keys changed."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            keys = load_worker_keys(self.path)
        except PackKeyError as exc:
            LOG.error("fleet: %s: %s; the keys read before stay trusted", KEYS_SETTING, exc.message)
            return False
        self.keys = keys
        LOG.info("fleet: %s read again: keys for %d host(s)", KEYS_SETTING, len(keys.by_host))
        return True
