"""The example pack of examples/packs: its committed archive and signature verify under the
committed test key, match the pack folder they were built from (examples/packs/rebuild.sh makes
all three again), and its skills and persona are named like nothing ``make run`` loads besides
(the example skills and personas, the bundled catalogue), so it installs there; its skills run."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

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
from ongrid_skills.runtime import load_registry
from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS

PACKS = EXAMPLE_SKILLS.parent / "packs"
SOURCE = PACKS / "ops-basics"
ARCHIVE = PACKS / "ops-basics-1.1.0.tar.gz"
PUBLIC = PACKS / "TEST-KEY-DO-NOT-USE.pub"


def test_the_committed_archive_is_signed_by_the_committed_test_key() -> None:
    verdict = verify_path(ARCHIVE, load_trusted_keys(PUBLIC))
    assert verdict.trust is Trust.TRUSTED
    assert verdict.signature_origin == str(ARCHIVE) + ".sig"
    assert verdict.manifest is not None
    assert verdict.manifest.label == "ops-basics@1.1.0"
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


def test_the_pack_holds_two_skills_a_guide_and_a_persona_named_like_nothing_make_run_loads() -> (
    None
):
    contents = inspect_pack(detect(SOURCE))
    assert contents.problems == ()
    assert contents.skill_names() == ["host_triage", "listening_sockets", "mount_report"]
    assert contents.persona_names() == ["oncall"]
    loaded = load_registry(  # what `make run` loads: the examples and the bundled catalogue
        [str(EXAMPLE_SKILLS)],
        [str(EXAMPLE_SKILLS.parent / "personas")],
        native_dirs=[],
        bundled=True,
        pack_roots=[],
        log=lambda _line: None,
    )
    assert set(contents.skill_names()).isdisjoint(loaded.skills)
    assert set(contents.persona_names()).isdisjoint(loaded.personas)


@pytest.mark.parametrize(
    ("folder", "args", "key"),
    [("listening-sockets", {}, "sockets"), ("mount-report", {"min_used_percent": 0}, "mounts")],
)
def test_its_skills_answer_on_this_host(folder: str, args: dict[str, int], key: str) -> None:
    ran = subprocess.run(
        [str(SOURCE / "skills" / folder / "run.py")],
        input=json.dumps(args),
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        timeout=30,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["count"] == len(answer[key]) > 0


def test_re_signing_with_the_test_key_gives_the_committed_signature() -> None:
    # Ed25519 signatures are deterministic: the same key and digest give the same bytes.
    key = load_signing_key(PACKS / "TEST-KEY-DO-NOT-USE")
    digest = digest_folder(SOURCE)
    committed = (PACKS / "ops-basics-1.1.0.tar.gz.sig").read_text()
    assert sign(digest, key).to_json() == committed
