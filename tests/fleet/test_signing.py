"""Signed calls (SPEC §17): the manager's key, the signature over the exact bytes, the checks."""

from __future__ import annotations

import base64
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ongrid_skills.errors import PackKeyError
from ongrid_skills.fleet.signing import (
    KEY_HEADER,
    SIGNATURE_HEADER,
    Call,
    Refused,
    check,
    manager_key,
    new_nonce,
    sign,
    verify,
)
from ongrid_skills.packs.keys import parse_trusted_keys
from ongrid_skills.settings import Settings


def a_call(**fields: object) -> Call:
    now = time.time()
    base = Call(
        kind="call",
        id="e" * 32,
        host="web-1",
        skill="clean_disk",
        definition_hash="a" * 64,
        skill_class="mutating",
        signatures=1,
        args={"path": "/var/tmp"},
        nonce=new_nonce(),
        issued_at=now,
        expires_at=now + 15,
        reply="ongrid.event.m1",
    )
    return replace(base, **fields)  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=str(tmp_path / "data"))


def test_the_manager_key_is_created_on_first_use_private_to_its_owner(settings: Settings) -> None:
    key = manager_key(settings)
    path = Path(settings.data_dir) / "fleet.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key.public_line.startswith("ssh-ed25519 ")
    assert manager_key(settings).fingerprint == key.fingerprint  # the same key, not a new one


def test_a_configured_key_file_that_is_missing_is_an_error_never_replaced(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), fleet_key_file=str(tmp_path / "nope.key"))
    with pytest.raises(PackKeyError, match="cannot read"):
        manager_key(settings)
    assert not (tmp_path / "nope.key").exists()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_fleet_key_readable_by_group_or_others_is_refused_as_the_audit_key_is(
    settings: Settings, tmp_path: Path, mode: int
) -> None:
    manager_key(settings)
    path = Path(settings.data_dir) / "fleet.key"
    path.chmod(mode)
    expected = (
        f"fleet key file {path} may be read by group or others (mode {mode:04o}); "
        f"refusing to use it: chmod 600 {path}"
    )
    with pytest.raises(PackKeyError) as caught:
        manager_key(settings)
    assert caught.value.message == expected
    configured = tmp_path / "configured.key"  # a configured file is held to the same rule
    configured.write_bytes(path.read_bytes())
    configured.chmod(mode)
    with pytest.raises(PackKeyError, match=r"fleet key file .*configured\.key may be read"):
        manager_key(Settings(data_dir=str(tmp_path), fleet_key_file=str(configured)))


def test_a_signed_call_verifies_with_the_public_key_in_openssh_or_pem(settings: Settings) -> None:
    key = manager_key(settings)
    call = a_call()
    body, headers = sign(key, call)
    assert verify(body, headers, parse_trusted_keys(key.public_line)) == call
    from cryptography.hazmat.primitives import serialization

    pem = key.public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    assert verify(body, headers, parse_trusted_keys(pem)) == call


def test_an_unsigned_message_is_refused(settings: Settings) -> None:
    trusted = parse_trusted_keys(manager_key(settings).public_line)
    with pytest.raises(Refused) as caught:
        verify(a_call().encode(), {}, trusted)
    assert caught.value.code == "unsigned"


def test_a_single_changed_byte_breaks_the_signature(settings: Settings) -> None:
    key = manager_key(settings)
    body, headers = sign(key, a_call())
    tampered = body.replace(b"/var/tmp", b"/var/lib")
    with pytest.raises(Refused) as caught:
        verify(tampered, headers, parse_trusted_keys(key.public_line))
    assert caught.value.code == "bad_signature"


def test_a_call_signed_by_another_key_is_refused(settings: Settings, tmp_path: Path) -> None:
    ours = manager_key(settings)
    theirs = manager_key(Settings(data_dir=str(tmp_path / "intruder")))
    body, headers = sign(theirs, a_call())
    with pytest.raises(Refused) as caught:
        verify(body, headers, parse_trusted_keys(ours.public_line))
    assert caught.value.code == "untrusted_key"
    # Claiming the trusted key's fingerprint does not help.
    headers[KEY_HEADER] = ours.fingerprint
    with pytest.raises(Refused) as caught:
        verify(body, headers, parse_trusted_keys(ours.public_line))
    assert caught.value.code == "bad_signature"


@pytest.mark.parametrize("signature", ["not base64!", base64.b64encode(os.urandom(64)).decode()])
def test_garbage_signatures_are_refused(settings: Settings, signature: str) -> None:
    key = manager_key(settings)
    body, _headers = sign(key, a_call())
    with pytest.raises(Refused) as caught:
        verify(body, {SIGNATURE_HEADER: signature}, parse_trusted_keys(key.public_line))
    assert caught.value.code == "bad_signature"


def test_signed_bytes_that_are_not_a_call_are_refused(settings: Settings) -> None:
    key = manager_key(settings)
    trusted = parse_trusted_keys(key.public_line)
    for body in (b"[1, 2]", b'{"kind": "call"}', b"\xff"):
        signature = base64.b64encode(key.private.sign(b"ongrid-skills fleet call v1\n" + body))
        with pytest.raises(Refused) as caught:
            verify(body, {SIGNATURE_HEADER: signature.decode()}, trusted)
        assert caught.value.code == "malformed"


def test_check_refuses_another_host_an_expired_call_and_one_issued_in_the_future() -> None:
    now = time.time()
    check(a_call(), "web-1", now)
    cases = [
        (a_call(host="web-2"), "wrong_host"),
        (a_call(expires_at=now - 1), "expired"),
        (a_call(issued_at=now + 3600, expires_at=now + 3615), "not_yet_valid"),
    ]
    for call, code in cases:
        with pytest.raises(Refused) as caught:
            check(call, "web-1", now)
        assert caught.value.code == code
