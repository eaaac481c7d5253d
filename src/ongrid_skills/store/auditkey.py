"""The audit key: where it comes from, who may read it, and the keyed hash (HMAC) it gives.

The key lives outside the database: ``ONGRID_AUDIT_KEY_FILE`` (given by the operator, required
to be the same file on every replica of a shared database) or ``$ONGRID_DATA_DIR/audit.key``,
created with mode 0600 the first time a store that is not keyed yet is opened. A key file that
group or others may read is refused. This module never creates a key for a chain that is already
keyed (a new key would make every keyed entry fail verification) and never logs key material.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from typing import Any

from ongrid_skills.errors import ConfigError
from ongrid_skills.paths import ExposedKeyFile, NotRegularFile, create_private_file, read_regular

KEY_BYTES = 32
DEFAULT_KEY_NAME = "audit.key"
_KEY_ID_LABEL = b"ongrid-skills audit key id"


def canonical(seq: int, ts: float, actor: str, action: str, subject: str | None, data: Any) -> str:
    """What an entry's hash covers besides the previous hash (``repr(ts)``: exact float text)."""
    return _CANONICAL([seq, repr(ts), actor, action, subject, data])


# Built once: json.dumps with keyword arguments builds a new encoder for every entry.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


class Sealer:
    """HMAC-SHA256 of ``prev_hash + canonical(entry)`` under one key, and that key's public id."""

    def __init__(self, key: bytes, path: str) -> None:
        if len(key) < KEY_BYTES:
            raise ConfigError(f"audit key file {path}: needs at least {KEY_BYTES} bytes of key")
        self.path = path
        self._base = hmac.new(key, digestmod=hashlib.sha256)
        # The id names the key in the head record and the anchor (so a replica started with
        # another key is refused with a clear message); it reveals nothing about the key.
        self.key_id = hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:16]

    def subkey(self, label: bytes) -> bytes:
        """A key for another use, derived from this one (HMAC of ``label``): replicas sharing
        the audit key share it, and it reveals nothing about the audit key."""
        mac = self._base.copy()
        mac.update(b"subkey:" + label)
        return mac.digest()

    def seal(self, prev: str, body: str) -> str:
        mac = self._base.copy()  # cheaper than hmac.new: the key schedule is done once
        mac.update((prev + body).encode())
        return mac.hexdigest()


def load_sealer(key_file: str | None, data_dir: str, chain_key_id: str | None) -> Sealer:
    """The operator's key file, else ``data_dir/audit.key`` (created when the chain is unkeyed).

    ``chain_key_id`` is the key id the chain's head record names (None: not keyed yet).
    """
    if key_file:
        if not os.path.exists(key_file):
            raise ConfigError(f"audit key file {key_file} (ONGRID_AUDIT_KEY_FILE) does not exist")
        return Sealer(_read_key(key_file), key_file)
    path = os.path.join(data_dir, DEFAULT_KEY_NAME)
    if not os.path.exists(path):
        if chain_key_id is not None:
            raise ConfigError(
                f"the audit chain is keyed (key id {chain_key_id}) but its key {path} is "
                "missing: restore that file, or point ONGRID_AUDIT_KEY_FILE at a copy of it "
                "(a new key would make every keyed entry fail verification)"
            )
        _create_key(path)
    return Sealer(_read_key(path), path)


def read_key_file(path: str, what: str) -> bytes:
    """The bytes of a key file (``what``: "audit key file"…), private to its owner and regular
    (symlinks allowed: mounted secrets); a :class:`ConfigError` naming it otherwise."""
    try:
        return read_regular(path, 4096, key_file=what)
    except NotRegularFile:
        raise ConfigError(f"{what} {path} is not a regular file") from None
    except ExposedKeyFile as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from None


def _read_key(path: str) -> bytes:
    raw = read_key_file(path, "audit key file")
    text = raw.strip()
    try:  # hex text (as created here, or `openssl rand -hex 32`), else raw bytes
        return bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return raw


def _create_key(path: str) -> None:
    """Write a new key atomically (another process creating it first wins: its key is used)."""
    create_private_file(path, secrets.token_hex(KEY_BYTES).encode() + b"\n")
