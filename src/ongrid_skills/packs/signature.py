"""Pack signatures: an Ed25519 signature over the pack digest, in a small JSON file.

The file is ``pack.sig`` at the pack's root (excluded from the digest) or ``<archive>.sig``
beside an archive; both hold one JSON object (UTF-8, no key twice, at most 64 KiB)::

    {
      "format": "ongrid-pack-signature v1",
      "digest": "sha256:<64 hex>",
      "signer": "SHA256:<fingerprint, as ssh-keygen -l prints it>",
      "key": "ssh-ed25519 AAAA… [comment]",
      "signature": "<base64 of the 64-byte Ed25519 signature>"
    }

The signed message is the UTF-8 bytes of ``ongrid-pack-signature v1\\n`` followed by the digest
string (``sha256:…``), so a signature made for something else never verifies as a pack's. A
signature is *valid* when ``key`` hashes to ``signer``, the signature verifies under ``key``
and ``digest`` equals the digest of the pack's files; the signer is *trusted* when its
fingerprint is one of the operator's trusted keys. Other fields are refused: a signature file
says exactly this and nothing more.

Signing and verifying are the ``cryptography`` package's; this module must never decide trust
from anything but a fingerprint, nor accept a digest it did not compare.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature

from ongrid_skills import strict_json
from ongrid_skills.errors import BadSignature, PackKeyError
from ongrid_skills.packs.digest import is_digest
from ongrid_skills.packs.keys import (
    SigningKey,
    TrustedKeys,
    decode_base64,
    fingerprint,
    is_fingerprint,
    parse_openssh_public,
)
from ongrid_skills.paths import read_regular

FORMAT = "ongrid-pack-signature v1"
FIELDS = ("format", "digest", "signer", "key", "signature")
MAX_SIGNATURE_BYTES = 64 * 1024
SIGNATURE_SUFFIX = ".sig"


def message(digest: str) -> bytes:
    """The bytes an Ed25519 signature of a pack covers."""
    return f"{FORMAT}\n{digest}".encode()


@dataclass(frozen=True, slots=True)
class PackSignature:
    """One signature as read from (or written to) a signature file."""

    digest: str
    signer: str
    key: str
    signature: str  # base64

    def to_dict(self) -> dict[str, str]:
        return {
            "format": FORMAT,
            "digest": self.digest,
            "signer": self.signer,
            "key": self.key,
            "signature": self.signature,
        }

    def to_json(self) -> str:
        """The signature file's text (two-space indented JSON, one trailing newline)."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def check(self, digest: str) -> None:
        """Raise BadSignature unless this is a valid signature of ``digest``."""
        if self.digest != digest:
            raise BadSignature(
                f"the signature is for {self.digest}, but the pack's digest is {digest}: "
                "the files changed after signing"
            )
        try:
            public = parse_openssh_public(self.key)
        except PackKeyError as exc:
            raise BadSignature(f"the signature's key is not usable: {exc}") from None
        if fingerprint(public) != self.signer:
            raise BadSignature(
                f"the signature names signer {self.signer} but carries the key "
                f"{fingerprint(public)}"
            )
        try:
            raw = decode_base64(self.signature)
            public.verify(raw, message(self.digest))
        except (ValueError, InvalidSignature):
            raise BadSignature(f"the signature by {self.signer} does not verify") from None

    def trusted_by(self, trusted: TrustedKeys) -> bool:
        """True when the signer's fingerprint is one of ``trusted``."""
        return self.signer in trusted


def sign(digest: str, key: SigningKey) -> PackSignature:
    """A signature of ``digest`` by ``key``."""
    if not is_digest(digest):
        raise ValueError(f"not a pack digest: {digest!r}")
    raw = key.private.sign(message(digest))
    return PackSignature(digest, key.fingerprint, key.public_line, base64.b64encode(raw).decode())


def parse_signature(raw: bytes, shown: str = "pack.sig") -> PackSignature:
    """A signature file's content, strictly; BadSignature naming what is wrong."""
    if len(raw) > MAX_SIGNATURE_BYTES:
        raise BadSignature(f"{shown}: over {MAX_SIGNATURE_BYTES} bytes: not a signature file")
    try:
        obj: Any = strict_json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadSignature(f"{shown}: not a JSON signature file: {exc}") from None
    if not isinstance(obj, dict):
        raise BadSignature(f"{shown}: expected a JSON object")
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise BadSignature(f"{shown}: unknown field {unknown[0]!r}")
    missing = [name for name in FIELDS if not isinstance(obj.get(name), str)]
    if missing:
        raise BadSignature(f"{shown}: {missing[0]} is required (a string)")
    if obj["format"] != FORMAT:
        raise BadSignature(f"{shown}: format {obj['format']!r} is not {FORMAT!r}")
    if not is_digest(obj["digest"]):
        raise BadSignature(f"{shown}: digest must be sha256: and 64 lowercase hex digits")
    if not is_fingerprint(obj["signer"]):
        raise BadSignature(f"{shown}: signer must be a SHA256: key fingerprint")
    return PackSignature(obj["digest"], obj["signer"], obj["key"], obj["signature"])


def read_signature(path: Path) -> PackSignature | None:
    """The signature file at ``path``; None when there is none, BadSignature when unusable."""
    try:
        raw = read_regular(str(path), MAX_SIGNATURE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadSignature(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_signature(raw, str(path))


def beside(archive: Path) -> Path:
    """Where the signature of an archive travels beside it: ``<archive>.sig``."""
    return archive.with_name(archive.name + SIGNATURE_SUFFIX)
