"""The credential store on a real SQLite data dir: values sealed, write-only, bound, injected."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.credentials.cipher import KEY_NAME
from ongrid_skills.credentials.service import Credentials
from ongrid_skills.credentials.sources import SourceRules
from ongrid_skills.errors import (
    Conflict,
    CredentialMissing,
    CredentialUnreadable,
    InvalidRequest,
    NotFound,
)
from ongrid_skills.skills.model import Skill
from ongrid_skills.store import Store, open_store
from tests.support.leaks import files_holding
from tests.support.skills import load, write_skill
from tests.support.store import migrated_data_dir

SECRET = "ghp_secret-value-0123456789"
SLOT = {
    "slot": "api",
    "label": "API token",
    "fields": ["token"],
    "inject": {
        "env": {"API_TOKEN": "{{token}}", "AUTH_HEADER": "Bearer {{token}}"},
        "files": [{"path": "token", "content": "{{token}}"}],
    },
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    migrated_data_dir(str(tmp_path / "data"))
    opened = open_store(str(tmp_path / "data"))
    yield opened
    opened.close()


def credentials_of(store: Store, tmp_path: Path, **rules: object) -> Credentials:
    return Credentials(
        store.credentials,
        data_dir=str(tmp_path / "data"),
        rules=SourceRules(**rules),  # type: ignore[arg-type]
        runtime_dir=str(tmp_path / "run"),
    )


def skill_with_slot(tmp_path: Path, name: str = "api_call", **manifest: object) -> Skill:
    write_skill(tmp_path / "skills", name, credentials=[SLOT], **manifest)
    registry, _ = load(external=[tmp_path / "skills"])
    return registry.get(name)


def test_a_stored_value_is_sealed_and_never_shown(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    info = creds.create("github", {"token": SECRET}, {}, actor="admin")
    assert SECRET not in json.dumps(info.to_dict())
    assert info.to_dict()["fields"] == {"token": "stored"}
    assert files_holding(tmp_path / "data", SECRET) == []
    key = tmp_path / "data" / KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_value_shorter_than_six_characters_is_refused(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    with pytest.raises(InvalidRequest, match="shorter than 6 characters cannot be masked"):
        creds.create("short", {"token": "12345"}, {}, actor="admin")
    with pytest.raises(NotFound):
        creds.get("short")


def test_every_change_is_an_audit_entry_with_names_only(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    skill = skill_with_slot(tmp_path)
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    creds.rotate("github", {"token": SECRET + "-new"}, {}, actor="admin")
    creds.bind("github", "api", "admin", skill=skill)
    creds.unbind("api", "admin", skill="api_call")
    creds.delete("github", "admin")
    entries = [e for e in reversed(store.audit.entries()) if e["action"].startswith("credential.")]
    assert [e["action"] for e in entries] == [
        "credential.created",
        "credential.rotated",
        "credential.bound",
        "credential.unbound",
        "credential.deleted",
    ]
    assert SECRET not in json.dumps(entries)


def test_a_bound_credential_cannot_be_deleted(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    creds.bind("github", "api", "admin", skill=skill_with_slot(tmp_path))
    with pytest.raises(Conflict, match="skill:api_call slot api"):
        creds.delete("github", "admin")


def test_binding_a_slot_the_skill_does_not_declare_is_refused(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    with pytest.raises(NotFound, match="no credential slot 'cloud'"):
        creds.bind("github", "cloud", "admin", skill=skill_with_slot(tmp_path))


def test_an_unbound_slot_makes_the_skill_miss_its_credential(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    skill = skill_with_slot(tmp_path)
    assert creds.missing(skill) == "needs credential for slot api"
    with pytest.raises(CredentialMissing, match="needs credential for slot api"):
        asyncio.run(creds.injection(skill))
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    creds.bind("github", "api", "admin", skill=skill)
    assert creds.missing(skill) is None


def test_a_pack_binding_serves_every_skill_of_the_pack(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    skill = skill_with_slot(tmp_path)
    skill.source = "pack:ops-basics"
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    creds.bind("github", "api", "admin", pack="ops-basics")
    assert creds.missing(skill) is None
    creds.create("other", {"token": SECRET + "2"}, {}, actor="admin")
    creds.bind("other", "api", "admin", skill=skill)  # the skill's own wins
    assert creds.bound(skill, creds.bindings(fresh=True)) == {"api": "other"}


def test_a_grant_injects_env_and_private_files_then_releases_them(
    store: Store, tmp_path: Path
) -> None:
    creds = credentials_of(store, tmp_path)
    skill = skill_with_slot(tmp_path)
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    creds.bind("github", "api", "admin", skill=skill)
    granted = asyncio.run(creds.grant(skill, "exec1"))
    assert granted is not None
    grant, slots = granted
    assert slots == {"api": "github"}
    assert grant.env == {"API_TOKEN": SECRET, "AUTH_HEADER": f"Bearer {SECRET}"}
    assert grant.directory is not None
    folder = Path(grant.directory)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "token").stat().st_mode) == 0o600
    assert (folder / "token").read_text() == SECRET
    assert grant.masker is not None
    assert grant.masker.mask(f"x {SECRET} y".encode()) == b"x *** y"
    creds.release(grant)
    assert not folder.exists()


def test_rotation_takes_effect_on_the_next_call(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    skill = skill_with_slot(tmp_path)
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    creds.bind("github", "api", "admin", skill=skill)
    creds.rotate("github", {"token": "rotated-value-42"}, {}, actor="admin")
    injection = asyncio.run(creds.injection(skill))
    assert injection is not None
    assert injection.env["API_TOKEN"] == "rotated-value-42"


def test_references_are_read_at_call_time(store: Store, tmp_path: Path) -> None:
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "token").write_text("from-a-file-123\n")
    printer = tmp_path / "printer"
    printer.write_text(f"#!{sys.executable}\nimport sys; print('from-a-command-' + sys.argv[1])\n")
    printer.chmod(0o755)
    creds = credentials_of(
        store,
        tmp_path,
        file_roots=(str(secrets_dir),),
        commands={"printer": (str(printer), "xyz")},
        env_names=("CREDENTIAL_TEST_TOKEN",),
    )
    skill = skill_with_slot(tmp_path)
    for name, reference, expected in (
        ("by-file", f"file:{secrets_dir}/token", "from-a-file-123"),
        ("by-env", "env:CREDENTIAL_TEST_TOKEN", "from-the-env-9"),
        ("by-command", "command:printer", "from-a-command-xyz"),
    ):
        creds.create(name, {}, {"token": reference}, actor="admin")
        creds.bind(name, "api", "admin", skill=skill)
        os.environ["CREDENTIAL_TEST_TOKEN"] = "from-the-env-9"
        try:
            injection = asyncio.run(creds.injection(skill))
        finally:
            del os.environ["CREDENTIAL_TEST_TOKEN"]
        assert injection is not None
        assert injection.env["API_TOKEN"] == expected
    (secrets_dir / "token").write_text("changed-in-place-77")
    creds.bind("by-file", "api", "admin", skill=skill)
    injection = asyncio.run(creds.injection(skill))
    assert injection is not None
    assert injection.env["API_TOKEN"] == "changed-in-place-77"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("file:/etc/shadow", "outside the credential file roots"),
        ("env:ONGRID_LLM_API_KEY", "a variable the operator lets credentials read"),
        ("env:HOME", "ONGRID_CREDENTIAL_ENV: none"),
        ("command:sh -c id", "with no arguments"),
        ("command:vault", "commands the operator configured"),
        ("url:https://x", "a reference is file:/path, env:NAME or command:NAME"),
    ],
)
def test_a_reference_the_operator_does_not_allow_is_refused(
    store: Store, tmp_path: Path, reference: str, message: str
) -> None:
    creds = credentials_of(store, tmp_path)
    with pytest.raises(InvalidRequest, match=message):
        creds.create("refused", {}, {"token": reference}, actor="admin")


@pytest.mark.parametrize(
    "pasted", [SECRET, f"Bearer {SECRET}", f"user:{SECRET}", 'command:x "' + SECRET]
)
def test_a_value_pasted_as_a_reference_is_refused_without_being_quoted(
    store: Store, tmp_path: Path, pasted: str
) -> None:
    """A reference box that got the secret itself: the refusal (shown by REST and the console)
    names the field and the forms a reference has, never what was typed."""
    creds = credentials_of(store, tmp_path)
    with pytest.raises(InvalidRequest) as refused:
        creds.create("pasted", {}, {"token": pasted}, actor="admin")
    assert refused.value.message.startswith("field token: ")
    assert SECRET not in refused.value.message and SECRET[:6] not in refused.value.message


def test_an_unreadable_reference_fails_the_call_by_name(store: Store, tmp_path: Path) -> None:
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\nexit 4\n")
    failing.chmod(0o755)
    creds = credentials_of(store, tmp_path, commands={"failing": (str(failing),)})
    skill = skill_with_slot(tmp_path)
    creds.create("broken", {}, {"token": "command:failing"}, actor="admin")
    creds.bind("broken", "api", "admin", skill=skill)
    with pytest.raises(
        CredentialUnreadable, match=r"field token of credential broken: .* status 4"
    ):
        asyncio.run(creds.injection(skill))


def test_a_key_file_others_may_read_is_refused(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    (tmp_path / "data" / KEY_NAME).chmod(0o644)
    fresh = credentials_of(store, tmp_path)
    skill = skill_with_slot(tmp_path)
    fresh.bind("github", "api", "admin", skill=skill)
    with pytest.raises(CredentialUnreadable, match="may be read by group or others"):
        asyncio.run(fresh.injection(skill))


def test_the_folders_of_a_dead_process_are_swept(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    base = Path(creds.calls_dir)
    stale = base / "999999999-1" / "exec1"  # a pid no process has
    stale.mkdir(parents=True)
    (stale / "token").write_text(SECRET)
    skill = skill_with_slot(tmp_path)
    creds.create("github", {"token": SECRET}, {}, actor="admin")
    creds.bind("github", "api", "admin", skill=skill)
    granted = asyncio.run(creds.grant(skill, "live"))
    assert granted is not None
    assert creds.sweep() == 1
    assert not stale.parent.exists()
    assert Path(granted[0].directory or "").exists()  # this process's own stays
    creds.release(granted[0])


def test_a_file_reference_through_a_link_out_of_the_roots_is_refused(
    store: Store, tmp_path: Path
) -> None:
    roots = tmp_path / "roots"
    roots.mkdir()
    (roots / "etclink").symlink_to("/etc")
    creds = credentials_of(store, tmp_path, file_roots=(str(roots),))
    for path in (f"{roots}/etclink/passwd", f"{roots}/etclink/../etclink/hostname"):
        with pytest.raises(InvalidRequest, match="links resolved"):
            creds.create("escape", {}, {"token": f"file:{path}"}, actor="admin")


def test_a_refused_reference_never_repeats_its_text(store: Store, tmp_path: Path) -> None:
    creds = credentials_of(store, tmp_path)
    for pasted in (f"command:{SECRET}", f"env:{SECRET}", f"file:/x/{SECRET}", SECRET):
        with pytest.raises(InvalidRequest) as refused:
            creds.create("pasted", {}, {"token": pasted}, actor="admin")
        assert SECRET not in refused.value.message
