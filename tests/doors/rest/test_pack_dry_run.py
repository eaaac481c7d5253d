"""``POST /v1/packs`` with ``dry_run``: every check of an install, the capability summary of
what the pack brings, and nothing changed; the summary kept on the record of a real install."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ongrid_skills.packs.build import build_archive
from ongrid_skills.settings import Settings
from ongrid_skills.skills.packroots import active_versions
from tests.support.packs import Entry, tar_gz, write_pack
from tests.support.server import Server, make_settings
from tests.support.skills import EXAMPLE_SKILLS, write_skill, write_skill_md

EXAMPLES = EXAMPLE_SKILLS.parent / "packs"
INDEX = json.loads((EXAMPLES / "index.json").read_text())
OPS = INDEX["packs"][0]["versions"][0]


@pytest.fixture
def server_settings(tmp_path: Path, skills_root: Path) -> Settings:
    trusted = tmp_path / "trusted.keys"
    trusted.write_text((EXAMPLES / "TEST-KEY-DO-NOT-USE.pub").read_text())
    write_skill(skills_root, "configured")
    return make_settings(
        tmp_path,
        skills_root,
        trusted_pack_keys=str(trusted),
        pack_indexes=(str(EXAMPLES / "index.json"),),
        pack_keep_seconds=0,
    )


def audit_actions(server: Server) -> list[str]:
    return [e["action"] for e in server.call("GET", "/v1/audit").json()["items"]]


def test_a_dry_run_shows_what_the_pack_brings_and_installs_nothing(server: Server) -> None:
    before = audit_actions(server)

    answer = server.call("POST", "/v1/packs", json={"source": "ops-basics", "dry_run": True})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["dry_run"], body["id"], body["version"], body["installed"]) == (
        True,
        "ops-basics",
        OPS["version"],
        None,
    )
    summary = body["summary"]
    assert summary["digest"] == OPS["digest"]
    assert summary["signer"] == {"key": OPS["signer"], "trust": "trusted", "trusted": True}
    skills = {s["name"]: (s["class"], s["scope"], s["kind"]) for s in summary["skills"]}
    assert skills == {
        "listening_sockets": ("safe", "manager", "subprocess"),
        "mount_report": ("safe", "manager", "subprocess"),
        "host_triage": ("safe", "manager", "instructions"),
    }
    assert summary["personas"][0]["name"] == "oncall"
    assert summary["personas"][0]["permission_mode"] == "read-only"
    assert summary["classes"] == {"safe": 2, "mutating": 0, "dangerous": 0}
    # Nothing changed: no pack, no link, no skill, no audit entry.
    assert server.call("GET", "/v1/packs").json()["items"] == []
    assert active_versions(server.settings.data_dir) == {}
    names = {s["name"] for s in server.call("GET", "/v1/skills").json()["items"]}
    assert "listening_sockets" not in names
    assert audit_actions(server) == before

    installed = server.call("POST", "/v1/packs", json={"source": "ops-basics"})
    assert installed.status_code == 201, installed.text
    assert installed.json()["pack"]["summary"] == summary
    shown = server.call("GET", "/v1/packs/ops-basics").json()
    assert shown["summary"] == summary


def test_an_upload_dry_run_keeps_the_trust_rules_and_reads_the_requirements(
    server: Server, tmp_path: Path
) -> None:
    folder = write_pack(tmp_path / "src", "needs", "0.2.0", skills=())
    write_skill_md(
        folder / "skills",
        "dig",
        {
            "name": "dig_deep",
            "description": "Look up a name.",
            "metadata": {"requires": {"bins": ["sh"], "config": ["resolver.url"]}},
        },
    )
    archive = build_archive(folder, tmp_path / "out").path
    files = {"file": (archive.name, archive.read_bytes(), "application/gzip")}

    refused = server.call("POST", "/v1/packs", files=files, data={"dry_run": "true"})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "untrusted_pack"

    data = {"dry_run": "true", "allow_unsigned": "true"}
    answer = server.call("POST", "/v1/packs", files=files, data=data)
    assert answer.status_code == 200, answer.text
    summary = answer.json()["summary"]
    assert summary["signer"] == {"key": None, "trust": "unsigned", "trusted": False}
    assert summary["warnings"][0] == "signature: unsigned"
    assert summary["requires"]["bins"] == ["sh"]
    assert summary["requires"]["config"] == ["resolver.url"]
    assert [s["name"] for s in summary["skills"]] == ["dig_deep"]
    assert server.call("GET", "/v1/packs").json()["items"] == []


def test_a_dry_run_of_a_pack_with_a_bad_manifest_answers_its_problems(
    server: Server, tmp_path: Path
) -> None:
    archive = tar_gz(
        tmp_path / "bad.tar.gz",
        [
            Entry("pack.json", b'{"id": "Bad Id!", "version": "one"}'),
            Entry("skills/a/skill.json", b'{"name": "a", "description": "a", "entry": "run"}'),
        ],
    )
    files = {"file": (archive.name, archive.read_bytes(), "application/gzip")}
    data = {"dry_run": "true", "allow_unsigned": "true"}

    answer = server.call("POST", "/v1/packs", files=files, data=data)

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_pack"
    assert "pack.json" in error["message"]
    assert server.call("GET", "/v1/packs").json()["items"] == []


def test_a_dry_run_refuses_a_pack_whose_names_are_taken_as_an_install_would(
    server: Server, tmp_path: Path
) -> None:
    folder = write_pack(tmp_path / "src", "clash", "1.0.0", skills=("configured",))
    archive = build_archive(folder, tmp_path / "out").path
    files = {"file": (archive.name, archive.read_bytes(), "application/gzip")}
    data = {"dry_run": "true", "allow_unsigned": "true"}

    answer = server.call("POST", "/v1/packs", files=files, data=data)

    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "skill_collision"
    assert "configured" in answer.json()["error"]["message"]
