"""/v1/packs on the composed app and a real store: admin only, installs from an upload or a
source, the registry swapped before the answer, every change audited as its caller, calls in
flight finishing on the files they started with, approvals void once the skill changed."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.keys import load_signing_key
from ongrid_skills.packs.trust import sign_path
from ongrid_skills.settings import Settings
from tests.support.packs import KeyPair, make_key, write_pack
from tests.support.server import Server, make_settings
from tests.support.skills import EXAMPLE_SKILLS, write_skill
from tests.support.waiting import wait_for

EXAMPLES = EXAMPLE_SKILLS.parent / "packs"

#: Waits for GATE to exist, then answers with the version file beside it (read only then).
GATED = """#!/bin/sh
cat >/dev/null
while [ ! -e "{gate}" ]; do sleep 0.05; done
printf '{{"version": "%s"}}' "$(cat "$(dirname "$0")/version.txt")"
"""


@pytest.fixture
def key(tmp_path: Path) -> KeyPair:
    return make_key(tmp_path / "keys", "author")


@pytest.fixture
def server_settings(tmp_path: Path, skills_root: Path, key: KeyPair) -> Settings:
    trusted = tmp_path / "trusted.keys"
    trusted.write_text(key.public.read_text() + (EXAMPLES / "TEST-KEY-DO-NOT-USE.pub").read_text())
    write_skill(skills_root, "configured")
    return make_settings(
        tmp_path,
        skills_root,
        trusted_pack_keys=str(trusted),
        pack_indexes=(str(EXAMPLES / "index.json"),),
        pack_keep_seconds=0,
        pack_max_unpacked_bytes=1024 * 1024,
        pack_max_files=100,
    )


def upload(server: Server, archive: Path, who: str = "admin", **fields: str) -> httpx.Response:
    files = {"file": (archive.name, archive.read_bytes(), "application/gzip")}
    signature = Path(str(archive) + ".sig")
    if signature.exists():
        files["signature"] = (signature.name, signature.read_bytes(), "application/json")
    return server.call("POST", "/v1/packs", who, files=files, data=fields)


def skill_names(server: Server) -> set[str]:
    return {s["name"] for s in server.call("GET", "/v1/skills").json()["items"]}


def gated_pack(base: Path, version: str, gate: Path) -> Path:
    folder = write_pack(base / version, "gated", version, skills=())
    write_skill(folder / "skills", "gated", GATED.format(gate=gate), **{"class": "safe"})
    (folder / "skills" / "gated" / "version.txt").write_text(version)
    write_skill(folder / "skills", "change", **{"class": "mutating"})
    out = base / f"out-{version}"
    out.mkdir()
    return build_archive(folder, out).path


def test_every_pack_route_is_for_admins_only(server: Server) -> None:
    routes = [
        ("GET", "/v1/packs"),
        ("GET", "/v1/packs/available"),
        ("GET", "/v1/packs/ops-basics"),
        ("POST", "/v1/packs"),
        ("DELETE", "/v1/packs/ops-basics"),
        ("POST", "/v1/packs/ops-basics/rollback"),
        ("POST", "/v1/packs/ops-basics/upgrade"),
    ]
    for who in ("vera", "olga"):
        for method, path in routes:
            answer = server.call(method, path, who, json={"source": "ops-basics"})
            assert answer.status_code == 403, (who, method, path, answer.text)
            assert answer.json()["error"]["code"] == "forbidden"


def test_an_index_id_installs_and_the_registry_holds_it_before_the_answer(server: Server) -> None:
    answer = server.call("POST", "/v1/packs", json={"source": "ops-basics"})

    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["action"], body["id"], body["version"]) == ("install", "ops-basics", "1.1.0")
    assert body["pack"]["trust"] == "trusted"
    assert {"listening_sockets", "mount_report", "host_triage"} <= skill_names(server)
    (listed,) = server.call("GET", "/v1/packs").json()["items"]
    assert listed["id"] == "ops-basics" and listed["installed_by"] == "admin"
    shown = server.call("GET", "/v1/packs/ops-basics").json()
    assert [v["state"] for v in shown["versions"]] == ["active"]
    (entry,) = server.store.audit.entries(action="pack.install")
    assert entry["actor"] == "admin"
    assert entry["data"]["signer"] == body["pack"]["signer"]
    assert entry["data"]["via"] == str(EXAMPLES / "index.json")
    reloads = server.store.audit.entries(action="registry.reloaded")
    assert reloads[0]["actor"] == "admin" and "mount_report" in reloads[0]["data"]["added"]
    available = server.call("GET", "/v1/packs/available", params={"q": "host"}).json()
    assert [(i["id"], i["installed"]) for i in available["items"]] == [("ops-basics", "1.1.0")]


def test_an_upload_must_be_signed_by_a_trusted_key_unless_allowed(
    server: Server, tmp_path: Path, key: KeyPair
) -> None:
    archive = build_archive(write_pack(tmp_path / "p", "ops", skills=("probe",)), tmp_path).path
    refused = upload(server, archive)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "untrusted_pack"
    assert "probe" not in skill_names(server)

    sign_path(archive, load_signing_key(key.private))
    signed = upload(server, archive)
    assert signed.status_code == 201, signed.text
    assert signed.json()["pack"]["source"] == f"upload:{archive.name}"
    assert "probe" in skill_names(server)


def test_unsigned_uploads_install_only_with_allow_unsigned(server: Server, tmp_path: Path) -> None:
    archive = build_archive(write_pack(tmp_path / "p", "ops", skills=("probe",)), tmp_path).path
    bad_flag = upload(server, archive, allow_unsigned="yes")
    assert bad_flag.status_code == 400
    allowed = upload(server, archive, allow_unsigned="true")
    assert allowed.status_code == 201
    assert allowed.json()["pack"]["trust"] == "unsigned"


def test_bad_requests_are_refused_with_their_codes(server: Server, tmp_path: Path) -> None:
    local = write_pack(tmp_path / "here", "here")
    cases = [
        ({"json": {"source": str(local)}}, 400, "invalid_request"),
        ({"json": {"source": "no-such-pack"}}, 404, "not_found"),
        ({"json": {"source": "x", "extra": 1}}, 400, "invalid_request"),
        ({"content": b"junk", "headers": {"content-type": "text/plain"}}, 400, "invalid_request"),
        ({"files": {"file": ("x.tar.gz", b"not an archive")}}, 400, "invalid_pack"),
        ({"files": {"other": ("x", b"")}}, 400, "invalid_request"),
    ]
    for kw, status, code in cases:
        headers = {**server.as_("admin"), **kw.pop("headers", {})}  # type: ignore[dict-item]
        answer = server.client.request("POST", "/v1/packs", headers=headers, **kw)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), kw
    assert server.call("GET", "/v1/packs").json()["items"] == []


def test_an_upload_over_the_limit_is_refused_before_it_is_read(server: Server) -> None:
    big = io.BytesIO()
    with tarfile.open(fileobj=big, mode="w") as tar:  # uncompressed: as big as its content
        info = tarfile.TarInfo("x/pack.json")
        payload = b"x" * (4 * 1024 * 1024)
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    files = {"file": ("big.tar", big.getvalue())}
    answer = server.call("POST", "/v1/packs", files=files)
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "too_large"


def test_a_collision_is_a_409_listing_each_name(server: Server, tmp_path: Path) -> None:
    archive = build_archive(write_pack(tmp_path / "p", "ops", skills=("configured",)), tmp_path)
    answer = upload(server, archive.path, allow_unsigned="true")
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "skill_collision"
    assert error["details"][0]["name"] == "configured"


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "gate"
    yield path
    path.touch()  # never leave a gated call waiting


def test_calls_in_flight_finish_on_their_files_and_removal_waits_for_them(
    server: Server, tmp_path: Path, gate: Path
) -> None:
    one = gated_pack(tmp_path, "1.0.0", gate)
    two = gated_pack(tmp_path, "2.0.0", gate)
    assert upload(server, one, allow_unsigned="true").status_code == 201
    first = server.call("POST", "/v1/skills/gated/execute", json={"wait": False}).json()

    assert upload(server, two, allow_unsigned="true").status_code == 201
    second = server.call("POST", "/v1/skills/gated/execute", json={"wait": False}).json()
    removed = server.call("DELETE", "/v1/packs/gated")
    assert removed.status_code == 200 and "gated" not in skill_names(server)
    home = Path(server.settings.data_dir) / "packs" / "gated"
    assert (home / "2.0.0").is_dir()  # a call still runs on it
    gate.touch()

    assert server.final(first["id"])["result"] == {"version": "1.0.0"}
    assert server.final(second["id"])["result"] == {"version": "2.0.0"}
    other = build_archive(write_pack(tmp_path / "o", "other", skills=("o",)), tmp_path).path
    upload(server, other, allow_unsigned="true")  # the next change collects what is due
    wait_for(lambda: not home.exists(), "the removed pack's files to go")


def test_upgrade_rollback_and_a_pending_approval_voided_by_the_change(
    server: Server, tmp_path: Path, gate: Path
) -> None:
    gate.touch()
    installed = upload(server, gated_pack(tmp_path, "1.0.0", gate), allow_unsigned="true")
    assert installed.status_code == 201
    assert server.call("POST", "/v1/packs/gated/rollback").status_code == 409
    pending = server.call("POST", "/v1/skills/change/execute", "olga", json={}).json()
    assert pending["status"] == "pending_approval"

    upgraded = upload(server, gated_pack(tmp_path, "2.0.0", gate), allow_unsigned="true")
    assert upgraded.json()["action"] == "upgrade"
    signed = server.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "oscar")
    assert signed.status_code == 409
    assert server.final(pending["id"])["error"]["code"] == "skill_changed"

    back = server.call("POST", "/v1/packs/gated/rollback")
    assert back.status_code == 200
    assert (back.json()["action"], back.json()["version"]) == ("rollback", "1.0.0")
    result = server.call("POST", "/v1/skills/gated/execute", json={}).json()
    assert result["result"] == {"version": "1.0.0"}
    shown = server.call("GET", "/v1/packs/gated").json()
    states = {v["version"]: v["state"] for v in shown["versions"]}
    assert states == {"1.0.0": "active", "2.0.0": "previous"}
    (entry,) = server.store.audit.entries(action="pack.rollback")
    assert entry["data"]["from_version"] == "2.0.0"
    upgrade = server.call("POST", "/v1/packs/gated/upgrade", json={})
    assert upgrade.status_code == 404  # no index offers it
