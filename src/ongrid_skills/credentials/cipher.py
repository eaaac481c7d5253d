"""The credentials key and the AES-GCM seal of stored values.

The key lives outside the database, like the audit key: ``ONGRID_CREDENTIALS_KEY_FILE`` (given
by the operator; the same file on every replica of a shared database) or
``$ONGRID_DATA_DIR/credentials.key``, created with mode 0600 the first time a value is stored.
A key file that group or others may read is refused with the message of every key file.

A sealed value is ``v1:<key id>:<base64 of nonce + ciphertext>``; the associated data binds it to
its credential and field, so a sealed value copied to another credential or field does not open.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ongrid_skills.errors import ConfigError
from ongrid_skills.paths import create_private_file
from ongrid_skills.store.auditkey import read_key_file

KEY_NAME = "credentials.key"
KEY_BYTES = 32
_NONCE_BYTES = 12
_VERSION = "v1"


class SealError(ValueError):
    """A sealed value that does not open with this key (another key, or altered)."""


class CredentialKey:
    """One AES-256-GCM key and its public id (which key sealed a value; reveals nothing)."""

    def __init__(self, key: bytes, path: str) -> None:
        if len(key) != KEY_BYTES:
            raise ConfigError(
                f"credentials key file {path}: needs exactly {KEY_BYTES} bytes of key"
            )
        self.path = path
        self._aead = AESGCM(key)
        self.key_id = hashlib.sha256(b"ongrid-skills credentials key id" + key).hexdigest()[:12]

    def seal(self, credential: str, field: str, value: str) -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, value.encode(), _aad(credential, field))
        body = base64.b64encode(nonce + sealed).decode()
        return f"{_VERSION}:{self.key_id}:{body}"

    def open(self, credential: str, field: str, sealed: str) -> str:
        version, key_id, body = [*sealed.split(":", 2), "", ""][:3]
        if version != _VERSION:
            raise SealError(f"field {field} of {credential}: unknown seal {version!r}")
        if key_id != self.key_id:
            raise SealError(
                f"field {field} of {credential} was sealed with another credentials key "
                f"(id {key_id}; this one is {self.key_id}): use that key file"
            )
        raw = base64.b64decode(body)
        try:
            plain = self._aead.decrypt(
                raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _aad(credential, field)
            )
        except InvalidTag:
            raise SealError(f"field {field} of {credential} does not open: altered") from None
        return plain.decode()


def _aad(credential: str, field: str) -> bytes:
    return f"ongrid-skills credential\n{credential}\n{field}".encode()


def load_key(key_file: str | None, data_dir: str, *, create: bool) -> CredentialKey | None:
    """The operator's key file, else ``data_dir/credentials.key`` (made when ``create``;
    without it, None when there is none yet: nothing was stored)."""
    if key_file:
        if not os.path.exists(key_file):
            raise ConfigError(
                f"credentials key file {key_file} (ONGRID_CREDENTIALS_KEY_FILE) does not exist"
            )
        return CredentialKey(_read(key_file), key_file)
    path = os.path.join(data_dir, KEY_NAME)
    if not os.path.exists(path):
        if not create:
            return None
        create_private_file(path, secrets.token_hex(KEY_BYTES).encode() + b"\n")
    return CredentialKey(_read(path), path)


def _read(path: str) -> bytes:
    text = read_key_file(path, "credentials key file").strip()
    try:  # hex text (as created here, or `openssl rand -hex 32`)
        return bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError(
            f"credentials key file {path}: expected {KEY_BYTES * 2} hex digits "
            "(openssl rand -hex 32)"
        ) from None


__all__ = ["KEY_NAME", "CredentialKey", "SealError", "load_key"]
