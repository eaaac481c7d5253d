"""The example pack of examples/packs: its committed archive and signature verify under the
committed test key, match the pack folder they were built from, and the folder's skills are
the example skills, byte for byte."""

from __future__ import annotations

import filecmp
import gzip
import os
import subprocess
from pathlib import Path

from ongrid_skills.packs import (
    Trust,
    build_archive,
    digest_folder,
    load_signing_key,
    load_trusted_keys,
    sign,
    verify_path,
)
from ongrid_skills.packs.contents import inspect_pack
from ongrid_skills.packs.layout import detect
from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS

PACKS = EXAMPLE_SKILLS.parent / "packs"
SOURCE = PACKS / "ops-basics"
ARCHIVE = PACKS / "ops-basics-1.0.0.tar.gz"
PUBLIC = PACKS / "TEST-KEY-DO-NOT-USE.pub"
COPIED = ("host-info", "port-check", "log-grep")


def test_the_committed_archive_is_signed_by_the_committed_test_key() -> None:
    verdict = verify_path(ARCHIVE, load_trusted_keys(PUBLIC))
    assert verdict.trust is Trust.TRUSTED
    assert verdict.signature_origin == str(ARCHIVE) + ".sig"
    assert verdict.manifest is not None
    assert verdict.manifest.label == "ops-basics@1.0.0"
    assert "DO NOT USE" in PUBLIC.read_text()


def test_the_command_verifies_it_too_and_trusts_nothing_without_the_key() -> None:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    trusted = subprocess.run(
        [CLI, "pack", "verify", ARCHIVE.name, "--trusted-keys", PUBLIC.name],
        cwd=PACKS,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert trusted.returncode == 0, trusted.stderr
    alone = subprocess.run(
        [CLI, "pack", "verify", ARCHIVE.name], cwd=PACKS, capture_output=True, env=env, check=False
    )
    assert alone.returncode == 3


def test_the_committed_archive_is_what_the_pack_folder_builds(tmp_path: Path) -> None:
    rebuilt = build_archive(SOURCE, tmp_path)
    assert (
        rebuilt.digest
        == digest_folder(SOURCE)
        == verify_path(ARCHIVE, load_trusted_keys(None)).digest
    )
    # The tar stream itself is byte for byte the same (gzip bytes could differ by zlib build).
    assert gzip.decompress(rebuilt.path.read_bytes()) == gzip.decompress(ARCHIVE.read_bytes())


def test_the_pack_holds_copies_of_the_example_skills_a_guide_and_a_persona() -> None:
    for name in COPIED:
        copy, original = SOURCE / "skills" / name, EXAMPLE_SKILLS / name
        compared = filecmp.dircmp(copy, original)
        assert compared.left_only == compared.right_only == [], name
        for file in compared.common_files:
            assert (copy / file).read_bytes() == (original / file).read_bytes(), f"{name}/{file}"
            assert os.access(copy / file, os.X_OK) == os.access(original / file, os.X_OK)
    contents = inspect_pack(detect(SOURCE))
    assert contents.problems == ()
    assert contents.skill_names() == ["host_info", "host_triage", "log_grep", "port_check"]
    assert contents.persona_names() == ["oncall"]


def test_re_signing_with_the_test_key_gives_the_committed_signature() -> None:
    # Ed25519 signatures are deterministic: the same key and digest give the same bytes.
    key = load_signing_key(PACKS / "TEST-KEY-DO-NOT-USE")
    digest = digest_folder(SOURCE)
    committed = (PACKS / "ops-basics-1.0.0.tar.gz.sig").read_text()
    assert sign(digest, key).to_json() == committed
