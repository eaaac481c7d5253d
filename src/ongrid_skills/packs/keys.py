"""Signing and trusted keys, in the formats operators already have: OpenSSH and PEM.

- A signing key is an Ed25519 private key in OpenSSH format (``ssh-keygen -t ed25519``), or
  PKCS#8 PEM. A passphrase-protected key needs its passphrase: without one
  :class:`~ongrid_skills.errors.PassphraseRequired` is raised, so a terminal can ask for it.
- Trusted keys are a file of ``ssh-ed25519 AAAA… comment`` lines (authorized_keys style:
  options before the key type are allowed and ignored, ``#`` comments and blank lines skipped)
  and/or ``-----BEGIN PUBLIC KEY-----`` PEM blocks. A key of another type (``ssh-rsa``…) or a
  malformed line is an error naming its line: a trust file is read whole or not at all.
- A key is named by its fingerprint exactly as ``ssh-keygen -l`` prints it: ``SHA256:`` and the
  unpadded base64 of the SHA-256 of the key's SSH wire encoding.

Every key operation is the ``cryptography`` package's; this module only reads files and names
keys. It must never log, print or keep a private key or a passphrase.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ongrid_skills.errors import PackKeyError, PassphraseRequired
from ongrid_skills.paths import ExposedKeyFile, read_regular

MAX_KEY_FILE_BYTES = 1024 * 1024
KEY_TYPE = "ssh-ed25519"
_PEM_RE = re.compile(
    r"-----BEGIN PUBLIC KEY-----\r?\n[A-Za-z0-9+/=\r\n]*?-----END PUBLIC KEY-----", re.DOTALL
)
_FINGERPRINT_RE = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


def fingerprint(key: Ed25519PublicKey) -> str:
    """``SHA256:…`` as ``ssh-keygen -l`` prints it."""
    blob = base64.b64decode(openssh_line(key).split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def is_fingerprint(text: object) -> bool:
    """True for a well-formed ``SHA256:`` fingerprint (43 base64 characters, unpadded)."""
    return isinstance(text, str) and _FINGERPRINT_RE.fullmatch(text) is not None


def openssh_line(key: Ed25519PublicKey, comment: str = "") -> str:
    """``ssh-ed25519 AAAA… [comment]``: the key as an authorized_keys line."""
    text = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    line = text.decode("ascii")
    return f"{line} {comment}" if comment else line


def parse_openssh_public(text: str) -> Ed25519PublicKey:
    """The key of one ``ssh-ed25519 AAAA… [comment]`` string; PackKeyError otherwise."""
    parts = text.split()
    if len(parts) < 2 or parts[0] != KEY_TYPE:
        raise PackKeyError("expected an 'ssh-ed25519 AAAA…' public key")
    try:
        key = serialization.load_ssh_public_key(f"{parts[0]} {parts[1]}".encode("ascii"))
    except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError) as exc:
        raise PackKeyError(f"not a valid ssh-ed25519 key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise PackKeyError("not an Ed25519 key")
    return key


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private key ready to sign, with its public half's fingerprint and OpenSSH line."""

    private: Ed25519PrivateKey = field(repr=False)
    fingerprint: str
    public_line: str
    path: str

    @property
    def public(self) -> Ed25519PublicKey:
        return self.private.public_key()


def read_key_file(path: str | Path, *, private: str | None = None) -> bytes:
    """The bytes of a key file (a regular file, at most 1 MiB); PackKeyError otherwise.

    ``private`` (what the file is, ``"fleet key file"``…): refused when group or others may
    read it, with the audit key's message (:func:`~ongrid_skills.paths.exposed_key_problem`).
    """
    try:
        raw = read_regular(str(path), MAX_KEY_FILE_BYTES + 1, key_file=private)
    except ExposedKeyFile as exc:
        raise PackKeyError(str(exc)) from None
    except OSError as exc:
        raise PackKeyError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise PackKeyError(f"{path}: over {MAX_KEY_FILE_BYTES} bytes: not a key file")
    return raw


def load_signing_key(
    path: str | Path, passphrase: bytes | None = None, *, private: str | None = None
) -> SigningKey:
    """The Ed25519 private key of ``path`` (OpenSSH or PKCS#8 PEM); ``private``: see
    :func:`read_key_file`.

    Raises PassphraseRequired when the key is encrypted and ``passphrase`` is missing or wrong,
    PackKeyError for anything else (unreadable, not a private key, not Ed25519).
    """
    raw = read_key_file(path, private=private)
    shown = str(path)
    if b"PRIVATE KEY-----" not in raw:
        hint = " (that is a public key: give the private one)" if _looks_public(raw) else ""
        raise PackKeyError(f"{shown}: not a private key{hint}")
    key: object
    try:
        if b"-----BEGIN OPENSSH PRIVATE KEY-----" in raw:
            key = serialization.load_ssh_private_key(raw, passphrase)
        else:
            key = serialization.load_pem_private_key(raw, passphrase)
    except TypeError as exc:  # encrypted without a passphrase, or a passphrase not needed
        if passphrase is None:
            raise PassphraseRequired(
                f"{shown}: the key is encrypted: give its passphrase"
            ) from None
        if "not encrypted" in str(exc):
            return load_signing_key(path, None, private=private)
        raise PackKeyError(f"{shown}: {exc}") from None
    except ValueError as exc:
        if passphrase is not None and _wrong_passphrase(exc):
            raise PassphraseRequired(f"{shown}: wrong passphrase") from None
        raise PackKeyError(f"{shown}: not a usable private key: {exc}") from None
    except UnsupportedAlgorithm as exc:
        raise PackKeyError(f"{shown}: unsupported key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        kind = type(key).__name__.removesuffix("PrivateKey").lstrip("_")
        raise PackKeyError(
            f"{shown}: not an Ed25519 key ({kind or 'unknown type'}): packs are signed with "
            "Ed25519 keys (ssh-keygen -t ed25519)"
        )
    public = key.public_key()
    return SigningKey(key, fingerprint(public), openssh_line(public), shown)


def _looks_public(raw: bytes) -> bool:
    return raw.lstrip().startswith((b"ssh-", b"-----BEGIN PUBLIC KEY"))


def _wrong_passphrase(exc: ValueError) -> bool:
    text = str(exc).lower()
    return "checksum" in text or "bad decrypt" in text or "incorrect password" in text


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """One trusted public key: its fingerprint, the comment it was given, where it came from."""

    fingerprint: str
    key: Ed25519PublicKey = field(repr=False, compare=False)
    comment: str = ""
    origin: str = ""  # path:line


@dataclass(frozen=True, slots=True)
class TrustedKeys:
    """The operator's trusted signing keys, by fingerprint."""

    keys: tuple[TrustedKey, ...] = ()

    def __contains__(self, fingerprint: object) -> bool:
        return any(k.fingerprint == fingerprint for k in self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def get(self, fingerprint: str) -> TrustedKey | None:
        return next((k for k in self.keys if k.fingerprint == fingerprint), None)


def parse_trusted_keys(text: str, origin: str = "trusted keys") -> TrustedKeys:
    """The keys of a trusted-keys text; PackKeyError naming the first bad line."""
    found: list[tuple[int, TrustedKey]] = []  # (line, key): kept in the file's order
    for match in _PEM_RE.finditer(text):
        first = text.count("\n", 0, match.start()) + 1
        try:
            key = serialization.load_pem_public_key(match.group().encode("ascii"))
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise PackKeyError(f"{origin}:{first}: not a valid PEM public key: {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise PackKeyError(f"{origin}:{first}: not an Ed25519 key: only Ed25519 signs packs")
        found.append((first, TrustedKey(fingerprint(key), key, "", f"{origin}:{first}")))
    rest = _PEM_RE.sub(lambda m: "\n" * m.group().count("\n"), text)
    for number, raw in enumerate(rest.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tokens = _tokens(line)
        where = f"{origin}:{number}"
        if KEY_TYPE not in tokens:
            kind = next((t for t in tokens if t.startswith(("ssh-", "ecdsa-", "sk-"))), None)
            if kind is not None:
                raise PackKeyError(f"{where}: a {kind} key: only ssh-ed25519 keys sign packs")
            raise PackKeyError(f"{where}: expected 'ssh-ed25519 AAAA… comment' or a PEM block")
        at = tokens.index(KEY_TYPE)
        try:
            key = parse_openssh_public(" ".join(tokens[at : at + 2]))
        except PackKeyError as exc:
            raise PackKeyError(f"{where}: {exc.message}") from None
        comment = " ".join(tokens[at + 2 :])
        found.append((number, TrustedKey(fingerprint(key), key, comment, where)))
    return TrustedKeys(tuple(key for _, key in sorted(found, key=lambda item: item[0])))


def load_trusted_keys(path: str | Path | None, *, private: str | None = None) -> TrustedKeys:
    """The trusted keys of the file ``path`` (``ONGRID_TRUSTED_PACK_KEYS``); none when unset;
    ``private``: see :func:`read_key_file`."""
    if path is None or str(path) == "":
        return TrustedKeys()
    raw = read_key_file(path, private=private)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PackKeyError(f"{path}: not UTF-8 text") from None
    return parse_trusted_keys(text, str(path))


def _tokens(line: str) -> list[str]:
    """The blank-separated tokens of an authorized_keys line; a quoted option (``from="a b"``)
    stays one token."""
    return re.findall(r'(?:[^\s"]|"[^"]*")+', line)


def decode_base64(text: str) -> bytes:
    """Strict base64 (the alphabet and padding checked); ValueError otherwise."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"not base64: {exc}") from None
