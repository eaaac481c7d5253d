"""Signed inventories (issue 27, item 1): the worker's own key, the trusted keys by host id, and
what makes an entry unverified. The catalogue's use of them is in test_catalogue.py; the attack
over a real bus in test_forged_inventory.py."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from ongrid_skills.errors import PackKeyError
from ongrid_skills.fleet.attest import (
    KeysFile,
    WorkerKeys,
    key_line,
    load_worker_keys,
    open_entry,
    parse_worker_keys,
    seal,
    worker_key,
)
from ongrid_skills.packs.keys import SigningKey
from ongrid_skills.settings import Settings

INVENTORY = b'{"host":"web-1","skills":[]}'


def key_of(tmp_path: Path, name: str) -> SigningKey:
    return worker_key(Settings(data_dir=str(tmp_path / name)))


def keys_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "workers.pub"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_worker_key_is_created_on_first_use_private_and_kept(tmp_path: Path) -> None:
    key = key_of(tmp_path, "w")
    path = tmp_path / "w" / "worker.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key_of(tmp_path, "w").fingerprint == key.fingerprint
    line = key_line("web-1", key)
    assert line.startswith(f"web-1 {key.public_line} ongrid-worker@")


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_a_worker_key_readable_by_group_or_others_is_refused_as_the_audit_key_is(
    tmp_path: Path, mode: int
) -> None:
    key_of(tmp_path, "w")
    path = tmp_path / "w" / "worker.key"
    path.chmod(mode)
    with pytest.raises(PackKeyError) as caught:
        key_of(tmp_path, "w")
    assert caught.value.message == (
        f"worker key file {path} may be read by group or others (mode {mode:04o}); "
        f"refusing to use it: chmod 600 {path}"
    )


def test_a_worker_keys_file_readable_by_group_or_others_is_refused_as_the_audit_key_is(
    tmp_path: Path,
) -> None:
    path = keys_file(tmp_path, key_line("web-1", key_of(tmp_path, "w")) + "\n", 0o644)
    with pytest.raises(PackKeyError) as caught:
        load_worker_keys(str(path))
    assert caught.value.message == (
        f"worker keys file {path} may be read by group or others (mode 0644); "
        f"refusing to use it: chmod 600 {path}"
    )


def test_a_key_is_trusted_for_the_host_ids_its_lines_name_only(tmp_path: Path) -> None:
    one, two = key_of(tmp_path, "one"), key_of(tmp_path, "two")
    text = (
        "# the fleet's workers\n\n"
        f"{key_line('web-1', one)}\n{key_line('web-1', two)}\n{key_line('web-2', two)}\n"
    )
    keys = parse_worker_keys(text, "workers.pub")
    assert [k.fingerprint for k in keys.for_host("web-1")] == [one.fingerprint, two.fingerprint]
    assert [k.fingerprint for k in keys.for_host("web-2")] == [two.fingerprint]
    assert keys.for_host("web-3") == ()
    assert open_entry(seal(one, INVENTORY), "web-1", keys).problem is None
    assert open_entry(seal(two, INVENTORY), "web-1", keys).problem is None  # a rotation
    refused = open_entry(seal(one, INVENTORY), "web-2", keys).problem
    assert refused == f"signed by {one.fingerprint}, not a key trusted for host web-2"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ssh-ed25519 AAAA comment", "workers.pub:1: expected 'host-id ssh-ed25519 AAAA… comment'"),
        ("web-1", "no key after the host id"),
        ("web-1 ssh-rsa AAAAB3Nza x", "workers.pub:1: expected an 'ssh-ed25519 AAAA…' public key"),
        ("a/b ssh-ed25519 AAAA x", "host id 'a/b' must be"),
    ],
)
def test_a_line_it_cannot_use_is_an_error_naming_it(line: str, message: str) -> None:
    with pytest.raises(PackKeyError, match=message.replace("(", r"\(")):
        parse_worker_keys(line + "\n", "workers.pub")


def test_what_makes_an_entry_unverified(tmp_path: Path) -> None:
    key = key_of(tmp_path, "w")
    keys = parse_worker_keys(key_line("web-1", key), "workers.pub")
    sealed = seal(key, INVENTORY)
    assert open_entry(sealed, "web-1", keys).inventory == INVENTORY
    unsigned = open_entry(INVENTORY, "web-1", keys).problem
    assert unsigned is not None and unsigned.startswith("unsigned")
    tampered = json.loads(sealed)
    tampered["inventory"] = tampered["inventory"].replace("web-1", "web-2")
    bad = open_entry(json.dumps(tampered).encode(), "web-1", keys).problem
    assert bad == "bad signature: the entry is not what the host's key signed"
    tampered = {**json.loads(sealed), "signature": "not base64!"}
    assert open_entry(json.dumps(tampered).encode(), "web-1", keys).problem == (
        "bad signature: it is not base64"
    )
    assert open_entry(sealed, "web-2", keys).problem == (
        "no key is trusted for host web-2 in ONGRID_FLEET_WORKER_KEYS"
    )
    assert open_entry(sealed, "web-1", WorkerKeys()).problem == (
        "no worker key is trusted: ONGRID_FLEET_WORKER_KEYS is not set"
    )


def test_the_keys_file_is_read_again_when_it_changes_and_kept_when_it_breaks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = key_of(tmp_path, "one"), key_of(tmp_path, "two")
    path = keys_file(tmp_path, key_line("web-1", one) + "\n")
    watched = KeysFile(str(path))
    assert watched.refresh() is False  # unchanged: not read again
    with path.open("a") as out:
        out.write(key_line("web-2", two) + "\n")
    assert watched.refresh() is True
    assert watched.keys.for_host("web-2")[0].fingerprint == two.fingerprint
    with path.open("a") as out:
        out.write("nonsense\n")
    with caplog.at_level(logging.ERROR, logger="ongrid_skills.fleet"):
        assert watched.refresh() is False
    assert "workers.pub:3" in caplog.text and "the keys read before stay trusted" in caplog.text
    assert watched.keys.for_host("web-2")  # the keys read before
    path.write_text(key_line("web-2", two) + "\n")  # web-1 no longer trusted
    assert watched.refresh() is True
    assert watched.keys.for_host("web-1") == ()


def test_a_keys_file_that_cannot_be_used_at_start_stops_the_manager(tmp_path: Path) -> None:
    path = keys_file(tmp_path, "nonsense\n")
    with pytest.raises(PackKeyError, match=r"workers\.pub:1"):
        KeysFile(str(path))
