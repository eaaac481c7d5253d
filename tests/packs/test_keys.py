"""Keys in the formats operators have: OpenSSH and PEM private keys, authorized_keys-style
trusted keys, and fingerprints exactly as ``ssh-keygen -l`` prints them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ongrid_skills.errors import PackKeyError, PassphraseRequired
from ongrid_skills.packs.keys import (
    fingerprint,
    load_signing_key,
    load_trusted_keys,
    parse_openssh_public,
    parse_trusted_keys,
)
from tests.support.packs import SSH_KEYGEN, make_key

#: A fixed vector: this public key's fingerprint as OpenSSH 9 printed it (ssh-keygen -l -f).
KNOWN_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDAnDy4GqZZgHxFamhgNtC/BcER5/eRUWyk2IIAxj41g"
KNOWN_FINGERPRINT = "SHA256:tX6PksueU6XuG2GXML4AV1wCn1+wybHIwZ4xzolBO2w"
KNOWN_PEM = (
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEAMCcPLgaplmAfEVqaGA20L8FwRHn95FRbKTYggDGPjWA=\n"
    "-----END PUBLIC KEY-----\n"
)


def test_a_known_key_has_the_fingerprint_ssh_keygen_printed() -> None:
    assert fingerprint(parse_openssh_public(KNOWN_KEY)) == KNOWN_FINGERPRINT


@pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen is not installed")
def test_fingerprints_match_ssh_keygen_on_fresh_keys(tmp_path: Path) -> None:
    for n in range(3):
        pair = make_key(tmp_path, f"k{n}")
        printed = subprocess.run(
            [str(SSH_KEYGEN), "-l", "-E", "sha256", "-f", str(pair.public)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[1]
        assert load_signing_key(pair.private).fingerprint == printed
        assert fingerprint(parse_openssh_public(pair.public_line)) == printed


def test_an_openssh_private_key_loads_with_its_public_line(tmp_path: Path) -> None:
    pair = make_key(tmp_path)
    key = load_signing_key(pair.private)
    assert key.public_line == " ".join(pair.public_line.split()[:2])
    assert "private=" not in repr(key)  # a key never shows up in a log or a traceback


def test_an_encrypted_key_needs_its_passphrase(tmp_path: Path) -> None:
    pair = make_key(tmp_path, passphrase="correct horse")
    with pytest.raises(PassphraseRequired, match="encrypted: give its passphrase"):
        load_signing_key(pair.private)
    with pytest.raises(PassphraseRequired, match="wrong passphrase"):
        load_signing_key(pair.private, b"wrong")
    assert load_signing_key(pair.private, b"correct horse").fingerprint == fingerprint(
        parse_openssh_public(pair.public_line)
    )


def test_a_passphrase_given_for_a_plain_key_is_ignored(tmp_path: Path) -> None:
    pair = make_key(tmp_path)
    assert load_signing_key(pair.private, b"unused").fingerprint


def test_a_pkcs8_pem_private_key_loads_and_names_the_same_key(tmp_path: Path) -> None:
    pair = make_key(tmp_path)
    key = load_signing_key(pair.private)
    pem = tmp_path / "key.pem"
    pem.write_bytes(
        key.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    assert load_signing_key(pem).fingerprint == key.fingerprint


def test_keys_that_cannot_sign_packs_are_refused_with_a_reason(tmp_path: Path) -> None:
    rsa_key = tmp_path / "rsa"
    rsa_key.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    ecdsa_key = tmp_path / "ecdsa.pem"
    ecdsa_key.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pair = make_key(tmp_path)
    garbage = tmp_path / "garbage"
    garbage.write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    cases = {
        rsa_key: "not an Ed25519 key (RSA)",
        ecdsa_key: "not an Ed25519 key (EC)",
        pair.public: "that is a public key: give the private one",
        garbage: "not a usable private key",
        tmp_path / "missing": "cannot read",
        tmp_path: "cannot read",
    }
    for path, message in cases.items():
        with pytest.raises(PackKeyError) as caught:
            load_signing_key(path)
        assert message in caught.value.message, path


def test_trusted_keys_read_authorized_keys_lines_and_pem_blocks() -> None:
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkmJ/KCrAvHUyMM3BKZ2pIZxsQlbGzWrvUgvmKgPkR2"
    text = (
        "# the ops team\n\n"
        f"{KNOWN_KEY} ops team packs\n"
        f'from="10.0.0.0/8,192.168.0.0/16",no-pty {other} ci@build\n'
        f"{KNOWN_PEM}"
    )
    trusted = parse_trusted_keys(text, "keys")
    assert len(trusted) == 3
    assert KNOWN_FINGERPRINT in trusted
    first = trusted.get(KNOWN_FINGERPRINT)
    assert first is not None
    assert (first.comment, first.origin) == ("ops team packs", "keys:3")
    assert [k.origin for k in trusted.keys] == ["keys:3", "keys:4", "keys:5"]
    assert trusted.keys[2].fingerprint == KNOWN_FINGERPRINT  # the PEM form of the same key


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 me", "keys:2: a ssh-rsa key"),
        ("ecdsa-sha2-nistp256 AAAAE2VjZHNh me", "keys:2: a ecdsa-sha2-nistp256 key"),
        ("ssh-ed25519 not-base64!! me", "keys:2: not a valid ssh-ed25519 key"),
        ("ssh-ed25519", "keys:2: expected an 'ssh-ed25519 AAAA…' public key"),
        ("hello world", "keys:2: expected 'ssh-ed25519 AAAA… comment' or a PEM block"),
    ],
)
def test_a_bad_line_refuses_the_whole_trust_file_naming_the_line(line: str, message: str) -> None:
    with pytest.raises(PackKeyError) as caught:
        parse_trusted_keys(f"{KNOWN_KEY}\n{line}\n", "keys")
    assert caught.value.message.startswith(message)


def test_a_pem_block_of_another_key_type_is_refused() -> None:
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with pytest.raises(PackKeyError, match="keys:1: not an Ed25519 key"):
        parse_trusted_keys(pem, "keys")


def test_no_trust_file_trusts_nothing_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    assert len(load_trusted_keys(None)) == 0
    assert len(load_trusted_keys("")) == 0
    empty = tmp_path / "empty"
    empty.write_text("# nobody yet\n")
    assert len(load_trusted_keys(empty)) == 0
    with pytest.raises(PackKeyError, match="cannot read"):
        load_trusted_keys(tmp_path / "missing")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(PackKeyError, match="not UTF-8"):
        load_trusted_keys(binary)
