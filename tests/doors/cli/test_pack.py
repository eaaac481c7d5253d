"""ongrid-skills pack build / sign / verify, driven as an operator would: a real process each."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pexpect
import pytest

from tests.support.packs import SSH_KEYGEN, Entry, make_key, pack_entries, tar_gz, write_pack
from tests.support.processes import CLI
from tests.support.skills import write_skill


def cli(
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    environ.update(env or {})
    return subprocess.run(
        [CLI, *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd,
        timeout=60,
    )


def test_build_writes_the_archive_here_and_prints_its_digest(tmp_path: Path) -> None:
    write_pack(tmp_path / "src", "ops", "1.0.0", skills=["alpha"], native=["triage"])
    done = cli("pack", "build", "src", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"built {tmp_path / 'ops-1.0.0.tar.gz'} (ops@1.0.0: 2 skills, 0 personas)"
    assert re.fullmatch(r"digest sha256:[0-9a-f]{64}", lines[1])
    first = (tmp_path / "ops-1.0.0.tar.gz").read_bytes()
    again = cli("pack", "build", "src", "-o", "again.tar.gz", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.tar.gz").read_bytes() == first
    body = json.loads(again.stdout)
    assert body["digest"] == lines[1].split()[1]
    assert body["skills"] == ["alpha", "triage"]
    assert body["pack"]["id"] == "ops"


def test_build_of_an_invalid_pack_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "src", skills=["alpha"])
    write_skill(root / "skills", "beta", entry="missing")
    (root / "pack.json").write_text('{"id": "Bad Id", "version": "1", "description": "d"}')
    done = cli("pack", "build", str(root), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: pack.json is not a valid pack manifest",
        "pack.json:1:2: error: id 'Bad Id' must match [a-z0-9_.-]+ (at most 64 characters)",
        "pack.json:1:18: error: version '1' is not a semantic version such as 1.0.0",
    ]
    (root / "pack.json").write_text('{"id": "ok", "version": "1.0.0", "description": "d"}')
    done = cli("pack", "build", str(root), cwd=tmp_path)
    assert done.returncode == 2
    assert "skills/beta/skill.json:1:" in done.stderr
    assert list(tmp_path.glob("*.tar.gz")) == []


def test_sign_then_verify_with_the_signers_key_trusted_exits_0(tmp_path: Path) -> None:
    pair = make_key(tmp_path / "keys")
    write_pack(tmp_path / "src")
    assert cli("pack", "build", "src", cwd=tmp_path).returncode == 0
    signed = cli("pack", "sign", "demo-1.0.0.tar.gz", "--key", str(pair.private), cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    signer = signed.stdout.splitlines()[1].split()[1]
    if SSH_KEYGEN is not None:
        printed = subprocess.run(
            [SSH_KEYGEN, "-l", "-f", str(pair.public)], capture_output=True, text=True, check=True
        ).stdout.split()[1]
        assert signer == printed
    assert signed.stdout.splitlines()[2] == "wrote demo-1.0.0.tar.gz.sig"
    done = cli(
        "pack", "verify", "demo-1.0.0.tar.gz", "--trusted-keys", str(pair.public), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "pack demo@1.0.0",
        signed.stdout.splitlines()[0].replace("signed", "digest"),
        f"signer {signer} (demo-1.0.0.tar.gz.sig)",
        "trusted: id_ed25519@test",
    ]
    by_env = cli(
        "pack",
        "verify",
        "demo-1.0.0.tar.gz",
        "--json",
        cwd=tmp_path,
        env={"ONGRID_TRUSTED_PACK_KEYS": str(pair.public)},
    )
    assert by_env.returncode == 0, by_env.stderr
    body = json.loads(by_env.stdout)
    assert (body["trust"], body["signer"], body["signed"]) == ("trusted", signer, True)


def test_verify_exits_3_when_unsigned_or_signed_by_a_stranger(tmp_path: Path) -> None:
    author, stranger = make_key(tmp_path / "keys", "author"), make_key(tmp_path / "keys", "x")
    folder = write_pack(tmp_path / "src")
    unsigned = cli("pack", "verify", str(folder), "--trusted-keys", str(author.public))
    assert unsigned.returncode == 3
    assert unsigned.stdout.splitlines()[-1] == "unsigned"
    assert cli("pack", "sign", str(folder), "--key", str(stranger.private)).returncode == 0
    untrusted = cli("pack", "verify", str(folder), "--trusted-keys", str(author.public))
    assert untrusted.returncode == 3
    assert untrusted.stdout.splitlines()[-1].startswith("not trusted")
    assert (
        json.loads(
            cli("pack", "verify", str(folder), "--json").stdout  # no trusted keys at all
        )["trust"]
        == "untrusted"
    )


def test_verify_exits_1_when_the_files_changed_after_signing(tmp_path: Path) -> None:
    pair = make_key(tmp_path / "keys")
    folder = write_pack(tmp_path / "src")
    assert cli("pack", "sign", str(folder), "--key", str(pair.private)).returncode == 0
    (folder / "skills" / "alpha" / "run").write_text("#!/bin/sh\nrm -rf /\n")
    done = cli("pack", "verify", str(folder), "--trusted-keys", str(pair.public))
    assert done.returncode == 1
    assert "the files changed after signing" in done.stderr
    as_json = cli("pack", "verify", str(folder), "--json", "--trusted-keys", str(pair.public))
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "bad_signature"


def test_verify_exits_2_for_an_unsafe_archive_or_a_bad_trust_file(tmp_path: Path) -> None:
    archive = tar_gz(tmp_path / "a.tar.gz", [*pack_entries(), Entry("../../evil", b"x")])
    done = cli("pack", "verify", str(archive))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: unsafe pack: ../../evil: a '..' component leaves the pack"
    )
    keys = tmp_path / "keys"
    keys.write_text("ssh-rsa AAAAB3NzaC1yc2E me\n")
    folder = write_pack(tmp_path / "src")
    done = cli("pack", "verify", str(folder), "--trusted-keys", str(keys))
    assert done.returncode == 2
    assert f"{keys}:1: a ssh-rsa key" in done.stderr
    assert cli("pack", "verify", str(tmp_path / "missing")).returncode == 2


def test_an_encrypted_key_reads_its_passphrase_from_stdin_when_not_a_terminal(
    tmp_path: Path,
) -> None:
    pair = make_key(tmp_path / "keys", passphrase="s3cret")
    folder = write_pack(tmp_path / "src")
    wrong = cli("pack", "sign", str(folder), "--key", str(pair.private), stdin="nope\n")
    assert wrong.returncode == 2
    assert "wrong passphrase" in wrong.stderr
    none = cli("pack", "sign", str(folder), "--key", str(pair.private))
    assert none.returncode == 2
    assert "no passphrase on stdin" in none.stderr
    assert not (folder / "pack.sig").exists()
    done = cli("pack", "sign", str(folder), "--key", str(pair.private), stdin="s3cret\n")
    assert done.returncode == 0, done.stderr
    assert (folder / "pack.sig").exists()
    assert "s3cret" not in done.stdout + done.stderr


def test_an_encrypted_key_asks_for_its_passphrase_on_a_terminal(tmp_path: Path) -> None:
    pair = make_key(tmp_path / "keys", passphrase="s3cret")
    folder = write_pack(tmp_path / "src")
    child = pexpect.spawn(
        CLI, ["pack", "sign", str(folder), "--key", str(pair.private)], timeout=30, encoding="utf-8"
    )
    child.expect("passphrase for ")
    child.sendline("wrong")
    child.expect("wrong passphrase")
    child.expect("passphrase for ")
    child.sendline("s3cret")
    child.expect("wrote ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (folder / "pack.sig").exists()


def test_sign_refuses_a_key_that_cannot_sign_packs(tmp_path: Path) -> None:
    pair = make_key(tmp_path / "keys")
    folder = write_pack(tmp_path / "src")
    done = cli("pack", "sign", str(folder), "--key", str(pair.public))
    assert done.returncode == 2
    assert "that is a public key: give the private one" in done.stderr


@pytest.mark.parametrize(
    "command", [["pack", "--help"], ["pack", "build", "--help"], ["pack", "verify", "-h"]]
)
def test_pack_help_is_there(command: list[str]) -> None:
    done = cli(*command)
    assert done.returncode == 0
    assert "Usage:" in done.stdout
