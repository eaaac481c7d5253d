"""The install transaction on a real data dir and a real store: install, upgrade, rollback,
remove, the trust policy, collisions, what is recorded and audited, and recovery of a change a
killed command left half done."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.errors import (
    Conflict,
    DigestMismatch,
    PackError,
    SkillCollision,
    UntrustedPack,
)
from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.home import PackHome, remove_tree
from ongrid_skills.packs.install import Candidate, Installer, Outcome
from ongrid_skills.packs.keys import load_signing_key, parse_trusted_keys
from ongrid_skills.packs.records import Change
from ongrid_skills.packs.trust import sign_path
from ongrid_skills.runtime import load_registry
from ongrid_skills.settings import Settings
from ongrid_skills.store import Store, open_store
from tests.support.packs import KeyPair, make_key, tree, write_pack
from tests.support.skills import write_skill


@dataclass
class World:
    settings: Settings
    store: Store
    home: PackHome
    installer: Installer
    key: KeyPair
    now: list[float]
    base: Path

    def install(self, path: Path, **kw: Any) -> Outcome:
        remote = bool(kw.pop("remote", False))
        allow = bool(kw.pop("allow_unsigned", False))
        candidate = Candidate(path, str(path), remote, **kw)
        work = self.home.new_staging()
        try:
            return self.installer.install(candidate, "cli:ada", work, allow_unsigned=allow)
        finally:
            remove_tree(work)

    def registry_skills(self) -> set[str]:
        return set(load_registry(settings=self.settings, log=lambda _line: None).skills)

    def audit(self, action: str) -> list[dict[str, Any]]:
        return self.store.audit.entries(action=action)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    skills = tmp_path / "skills"
    write_skill(skills, "configured")
    key = make_key(tmp_path / "keys", "author")
    trusted_file = tmp_path / "trusted.keys"
    trusted_file.write_text(key.public.read_text())
    settings = Settings(
        external_dirs=(str(skills),),
        data_dir=str(tmp_path / "data"),
        bundled_skills=False,
        trusted_pack_keys=str(trusted_file),
    )
    store = open_store(settings.data_dir)
    home = PackHome(settings.data_dir)
    now = [1_000_000.0]
    installer = Installer(
        home,
        store.packs(home.home_id),
        trusted=parse_trusted_keys(trusted_file.read_text()),
        loaded=lambda: load_registry(settings=settings, log=lambda _line: None),
        clock=lambda: now[0],
    )
    try:
        yield World(settings, store, home, installer, key, now, tmp_path)
    finally:
        store.close()


def signed_archive(world: World, folder: Path) -> Path:
    archive = build_archive(folder, world.base).path
    sign_path(archive, load_signing_key(world.key.private))
    return archive


def test_an_installed_pack_is_active_read_only_recorded_audited_and_loaded(world: World) -> None:
    folder = write_pack(
        world.base / "src",
        "ops",
        "1.0.0",
        skills=("probe",),
        native=("howto",),
        personas=("oncall",),
    )
    archive = signed_archive(world, folder)

    outcome = world.install(archive, remote=True)

    assert outcome.action == "install"
    assert world.home.active() == {"ops": "1.0.0"}
    installed = world.home.version_dir("ops", "1.0.0")
    for path in [installed, *installed.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o222 == 0, path
    run = installed / "skills" / "probe" / "run"
    assert os.access(run, os.X_OK)
    (row,) = world.store.packs(world.home.home_id).versions("ops")
    assert (row.version, row.source, row.installed_by, row.trust) == (
        "1.0.0",
        str(archive),
        "cli:ada",
        "trusted",
    )
    assert row.signer == load_signing_key(world.key.private).fingerprint
    assert row.skills == ("howto", "probe") and row.personas == ("oncall",)
    (entry,) = world.audit("pack.install")
    assert entry["actor"] == "cli:ada" and entry["subject"] == "ops"
    assert entry["data"]["version"] == "1.0.0"
    assert entry["data"]["digest"] == row.digest and entry["data"]["signer"] == row.signer
    assert entry["data"]["source"] == str(archive)
    registry = load_registry(settings=world.settings, log=lambda _line: None)
    assert {"configured", "probe"} <= set(registry.skills)
    assert "oncall" in registry.personas
    assert registry.skills["probe"].origin.startswith(str(installed))
    # Where each skill came from, as SPEC §9 names it (REST, the console's source filter).
    assert registry.skills["probe"].source == "pack:ops"
    assert registry.skills["howto"].source == "pack:ops"
    assert registry.skills["configured"].source == "external"
    assert list(world.home.staging_dir.iterdir()) == []


def test_a_local_unsigned_pack_installs_with_a_warning(world: World) -> None:
    outcome = world.install(write_pack(world.base / "src", "ops"))
    assert any("not signed" in w for w in outcome.warnings)
    assert world.home.active() == {"ops": "1.0.0"}


def test_a_remote_pack_must_be_signed_by_a_trusted_key(world: World) -> None:
    folder = write_pack(world.base / "src", "ops")
    stranger = make_key(world.base / "keys", "stranger")
    archive = build_archive(folder, world.base).path
    with pytest.raises(UntrustedPack, match="not signed"):
        world.install(archive, remote=True)
    sign_path(archive, load_signing_key(stranger.private))
    with pytest.raises(UntrustedPack, match="not a trusted key"):
        world.install(archive, remote=True)
    assert world.home.active() == {}
    assert world.store.packs(world.home.home_id).versions() == []
    outcome = world.install(archive, remote=True, allow_unsigned=True)
    assert outcome.record.trust == "untrusted"


def test_a_pack_that_fails_validation_installs_nothing(world: World) -> None:
    folder = write_pack(world.base / "src", "ops", skills=("good",))
    bad = folder / "skills" / "broken"
    bad.mkdir()
    (bad / "skill.json").write_text('{"name": "broken"')
    with world.home.lock():
        before = tree(world.home.root)

    with pytest.raises(PackError) as caught:
        world.install(folder)

    assert "skills/broken/skill.json" in str(caught.value)
    assert tree(world.home.root) == before
    assert world.store.packs(world.home.home_id).versions() == []
    assert world.audit("pack.install") == []


def test_collisions_are_refused_listing_each(world: World) -> None:
    world.install(write_pack(world.base / "first", "first", skills=("shared",)))
    second = write_pack(world.base / "second", "second", skills=("configured", "shared", "own"))

    with pytest.raises(SkillCollision) as caught:
        world.install(second)

    names = {(kind, name) for kind, name, _where in caught.value.collisions}
    assert names == {("skill", "configured"), ("skill", "shared")}
    details = caught.value.to_dict()["details"]
    assert any(str(world.home.version_dir("first", "1.0.0")) in d["existing"] for d in details)
    assert world.home.active() == {"first": "1.0.0"}


def test_an_upgrade_keeps_the_previous_version_and_rollback_toggles(world: World) -> None:
    world.install(write_pack(world.base / "v1", "ops", "1.0.0", skills=("probe",)))
    world.now[0] += 10
    outcome = world.install(write_pack(world.base / "v2", "ops", "1.1.0", skills=("probe",)))
    assert (outcome.action, outcome.from_version) == ("upgrade", "1.0.0")
    assert world.home.has_version("ops", "1.0.0") and world.home.has_version("ops", "1.1.0")

    world.now[0] += 10
    back = world.installer.rollback("ops", "cli:ada")
    assert (back.action, back.version, back.from_version) == ("rollback", "1.0.0", "1.1.0")
    assert world.home.active() == {"ops": "1.0.0"}
    world.now[0] += 10
    assert world.installer.rollback("ops", "cli:ada").version == "1.1.0"
    entries = world.audit("pack.rollback")
    assert [e["data"]["version"] for e in entries] == ["1.1.0", "1.0.0"]  # newest first


def test_a_third_version_withdraws_the_oldest_and_its_files_go_when_due(world: World) -> None:
    for number, version in enumerate(("1.0.0", "1.1.0", "1.2.0")):
        world.now[0] += 10
        world.install(write_pack(world.base / f"v{number}", "ops", version, skills=("probe",)))
    rows = {r.version: r for r in world.store.packs(world.home.home_id).versions("ops")}
    assert rows["1.0.0"].withdrawn_at is not None
    assert world.home.has_version("ops", "1.0.0")  # kept: a call may still run on it
    world.now[0] += rows["1.0.0"].keep_seconds + 1
    world.installer.collect()
    assert not world.home.has_version("ops", "1.0.0")
    assert set(r.version for r in world.store.packs(world.home.home_id).versions("ops")) == {
        "1.1.0",
        "1.2.0",
    }


def test_remove_withdraws_every_skill_at_once_and_keeps_files_until_due(world: World) -> None:
    world.install(write_pack(world.base / "src", "ops", skills=("probe", "peek")))
    assert {"probe", "peek"} <= world.registry_skills()

    outcome = world.installer.remove("ops", "cli:ada")

    assert (outcome.action, outcome.removed) == ("remove", True)
    assert world.home.active() == {}
    assert not {"probe", "peek"} & world.registry_skills()
    assert world.home.has_version("ops", "1.0.0")
    (entry,) = world.audit("pack.remove")
    assert entry["data"]["from_version"] == "1.0.0" and entry["data"]["version"] is None
    again = world.installer.remove("ops", "cli:ada")  # a retried removal is safe
    assert (again.action, again.removed, again.version) == ("unchanged", False, None)
    assert again.warnings == ("pack ops is not installed (removed already?): nothing changed",)
    assert len(world.audit("pack.remove")) == 1
    never = world.installer.remove("never-here", "cli:ada").to_dict()
    assert (never["removed"], never["warnings"]) == (
        False,
        ["pack never-here is not installed (removed already?): nothing changed"],
    )
    world.now[0] += 10_000
    world.installer.collect()
    assert not (world.home.root / "ops").exists()


def test_an_index_candidate_must_have_the_digest_and_signer_it_names(world: World) -> None:
    archive = signed_archive(world, write_pack(world.base / "src", "ops"))
    wrong = "sha256:" + "0" * 64
    with pytest.raises(DigestMismatch, match="the index names"):
        world.install(archive, remote=True, digest=wrong)
    with pytest.raises(DigestMismatch, match="signed by"):
        world.install(archive, remote=True, signer="SHA256:" + "A" * 43)
    assert world.home.active() == {}


def test_reinstalling_the_same_files_changes_nothing_and_other_files_conflict(
    world: World,
) -> None:
    world.install(write_pack(world.base / "a", "ops", skills=("probe",)))
    assert world.install(write_pack(world.base / "b", "ops", skills=("probe",))).action == (
        "unchanged"
    )
    changed = write_pack(world.base / "c", "ops", skills=("probe", "other"))
    with pytest.raises(Conflict, match="another digest"):
        world.install(changed)


def test_a_change_whose_link_was_switched_is_committed_by_the_next_command(world: World) -> None:
    records = world.store.packs(world.home.home_id)
    world.install(write_pack(world.base / "v1", "ops", "1.0.0"))
    world.install(write_pack(world.base / "v2", "ops", "1.1.0"))
    # As if killed between the switch and the commit of a rollback:
    change = Change("rollback", "ops", "1.1.0", "1.0.0", "cli:ada", world.now[0] + 5)
    records.begin(change, None)
    world.home.switch("ops", "1.0.0")

    world.installer.recover()

    assert records.pending() == []
    (entry,) = world.audit("pack.rollback")
    assert entry["data"]["recovered"] is True and entry["actor"] == "cli:ada"


def test_a_change_whose_link_was_not_switched_is_aborted_and_its_files_deleted(
    world: World,
) -> None:
    records = world.store.packs(world.home.home_id)
    world.install(write_pack(world.base / "v1", "ops", "1.0.0"))
    outcome = world.install(write_pack(world.base / "v2", "ops", "2.0.0"))
    world.installer.rollback("ops", "cli:ada")
    assert outcome.record is not None
    # As if killed after placing 3.0.0, before the switch:
    fresh = write_pack(world.base / "v3", "ops", "3.0.0")
    added = replace(outcome.record, version="3.0.0", activated_at=None)
    change = Change("upgrade", "ops", "1.0.0", "3.0.0", "cli:ada", world.now[0])
    records.begin(change, added)
    world.home.place(fresh, "ops", "3.0.0")

    world.installer.recover()

    assert world.home.active() == {"ops": "1.0.0"}
    assert not world.home.has_version("ops", "3.0.0")
    assert "3.0.0" not in {r.version for r in records.versions("ops")}
    assert [e["data"]["version"] for e in world.audit("pack.upgrade")] == ["2.0.0"]


def test_concurrent_installs_are_serialised_and_both_recorded(world: World) -> None:
    folders = [write_pack(world.base / f"p{n}", f"pack{n}", skills=(f"s{n}",)) for n in range(4)]
    errors: list[BaseException] = []

    def run(folder: Path) -> None:
        try:
            world.install(folder)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f,)) for f in folders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert world.home.active() == {f"pack{n}": "1.0.0" for n in range(4)}
    assert len(world.audit("pack.install")) == 4
