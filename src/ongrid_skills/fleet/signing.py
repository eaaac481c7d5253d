"""Signed calls: the manager's Ed25519 key, the envelope it signs, and the worker's checks.

What a party able to publish on the bus must not achieve is making a worker run anything. So
every message a manager sends a worker (a call or a cancel) is a JSON body signed with the
manager's Ed25519 key: the signature covers a domain prefix and the body's exact bytes, and
travels in a header with the key's fingerprint. A worker obeys only the keys it is configured
with (``ONGRID_FLEET_MANAGER_KEYS``: OpenSSH lines or PEM blocks, as for packs), only calls for
its own host id, only before their expiry, and each nonce once (:mod:`.nonces`).

The key lives in ``$ONGRID_DATA_DIR/fleet.key`` (OpenSSH private key format, mode 0600, created
on first use like the audit key, and refused like it when group or others may read it) unless
``ONGRID_FLEET_KEY_FILE`` names one; replicas either
share one key file or each put its public key in the workers' file. This module never logs or
returns private key material.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ongrid_skills.packs.keys import SigningKey, TrustedKeys, decode_base64, load_signing_key
from ongrid_skills.settings import Settings

KEY_NAME = "fleet.key"
DOMAIN = b"ongrid-skills fleet call v1\n"
SIGNATURE_HEADER = "Ongrid-Signature"
KEY_HEADER = "Ongrid-Key"
#: How far in the future a call's issue time may be (the manager's clock ahead of the worker's).
CLOCK_SKEW_SECONDS = 30.0
KINDS = ("call", "cancel")


class Refused(Exception):
    """A message the worker will not act on: ``code`` says why (logged, counted)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Call:
    """What a manager asks of one host: run a call (``kind='call'``) or cancel one."""

    kind: str
    id: str  # the execution id
    host: str
    skill: str
    definition_hash: str
    skill_class: str  # the class the manager's gate decided with
    signatures: int  # the human signatures that class needs (SIGNATURES, or 1 for a confirmation)
    args: Any
    nonce: str
    issued_at: float
    expires_at: float
    reply: str  # the subject prefix the worker sends the call's events under
    #: Slot -> the credential the host must give the call (names only; never a value).
    credentials: dict[str, str] = field(default_factory=dict)
    #: A request's preview (SPEC §20): run the skill's declared preview, as a safe call with
    #: no signature, never its real call (the worker checks the skill declares one).
    preview: bool = False

    def encode(self) -> bytes:
        body = asdict(self)
        if not self.preview:  # absent from a real call: a worker older than previews takes it
            del body["preview"]
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def new_nonce() -> str:
    return secrets.token_hex(16)


def key_path(settings: Settings) -> str:
    return settings.fleet_key_file or os.path.join(settings.data_dir, KEY_NAME)


def manager_key(settings: Settings) -> SigningKey:
    """The manager's signing key: the configured file, else ``data_dir/fleet.key``, created
    the first time (a configured file that is missing is an error, never replaced)."""
    path = key_path(settings)
    if not settings.fleet_key_file and not os.path.exists(path):
        create_key(path)
    return load_signing_key(path, private="fleet key file")


def create_key(path: str) -> None:
    """Write a new key atomically: a process racing us reads either no file or a whole key."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    private = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, private)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # another process created it first: use theirs
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def sign(key: SigningKey, call: Call) -> tuple[bytes, dict[str, str]]:
    """The body and the headers (signature, key fingerprint) of a call on the bus."""
    body = call.encode()
    signature = key.private.sign(DOMAIN + body)
    return body, {
        SIGNATURE_HEADER: base64.b64encode(signature).decode(),
        KEY_HEADER: key.fingerprint,
    }


def verify(body: bytes, headers: Mapping[str, str] | None, trusted: TrustedKeys) -> Call:
    """The call, if a trusted key signed exactly these bytes; :class:`Refused` otherwise."""
    headers = headers or {}
    signature_text = headers.get(SIGNATURE_HEADER)
    if not signature_text:
        raise Refused("unsigned", "the message carries no signature")
    fingerprint = headers.get(KEY_HEADER, "")
    candidates = [k for k in trusted.keys if k.fingerprint == fingerprint] or list(trusted.keys)
    try:
        signature = decode_base64(signature_text)
    except ValueError:
        raise Refused("bad_signature", "the signature is not base64") from None
    for trusted_key in candidates:
        try:
            trusted_key.key.verify(signature, DOMAIN + body)
        except InvalidSignature:
            continue
        return _parse(body)
    if fingerprint and fingerprint not in trusted:
        raise Refused("untrusted_key", f"signed by {fingerprint[:60]}, not a trusted manager key")
    raise Refused("bad_signature", "the signature does not match the message")


def _parse(body: bytes) -> Call:
    try:
        data = json.loads(body)
        call = Call(**data)
    except (ValueError, TypeError, RecursionError):
        raise Refused("malformed", "a signed message that is not a call") from None
    text = (call.kind, call.id, call.host, call.skill, call.definition_hash, call.nonce, call.reply)
    numbers = (call.issued_at, call.expires_at)
    if not all(isinstance(v, str) for v in text) or call.kind not in KINDS:
        raise Refused("malformed", "a signed message with fields of the wrong type")
    if not isinstance(call.skill_class, str) or type(call.signatures) is not int:
        raise Refused("malformed", "a signed message without the skill's class and signatures")
    names = call.credentials
    if not isinstance(names, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in names.items()
    ):
        raise Refused("malformed", "a signed message whose credentials are not names")
    if not isinstance(call.preview, bool):
        raise Refused("malformed", "a signed message whose preview mark is not a boolean")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
        raise Refused("malformed", "a signed message with times that are not numbers")
    return call


def check(call: Call, host: str, now: float) -> None:
    """The checks after the signature: this host, within its validity (:class:`Refused`)."""
    if call.host != host:
        raise Refused("wrong_host", f"the call is for host {call.host[:100]!r}, this is {host!r}")
    if now > call.expires_at:
        late = now - call.expires_at
        raise Refused("expired", f"the call expired {late:.1f} s ago: it is never taken late")
    if call.issued_at > now + CLOCK_SKEW_SECONDS:
        raise Refused("not_yet_valid", "issued in the future: are the clocks synchronised?")
