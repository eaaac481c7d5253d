"""Where ``POST /v1/packs`` takes a pack from: a remote index never names a source of the
server's host, a path of the server is refused without being looked at, a bare word is a pack
id whatever the server's current folder holds, every install records its own source, signer
and caller, and an unpinned id never goes back to an older version."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.digest import digest_folder
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.index import build_index
from ongrid_skills.packs.keys import SigningKey, load_signing_key
from ongrid_skills.packs.trust import sign_path
from ongrid_skills.settings import Settings
from tests.support.index_server import IndexServer, index_server
from tests.support.packs import make_key, write_pack
from tests.support.server import Server, make_settings
from tests.support.skills import EXAMPLE_SKILLS

EXAMPLES = EXAMPLE_SKILLS.parent / "packs"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@dataclass
class World:
    base: Path
    signer: SigningKey
    market: IndexServer
    repo: Path

    def archive(self, pack_id: str, version: str, *, signed: bool = True) -> Path:
        folder = write_pack(self.base / "src" / f"{pack_id}-{version}", pack_id, version)
        out = self.base / "out" / f"{pack_id}-{version}-{int(signed)}"
        out.mkdir(parents=True)
        path = build_archive(folder, out).path
        if signed:
            sign_path(path, self.signer)
        return path


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    key = make_key(tmp_path / "keys", "author")
    signer = load_signing_key(key.private)
    repo = write_pack(tmp_path / "repo", "hostile")
    sign_path(repo, signer)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "one")):
        subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, timeout=60)
    with index_server() as market:
        yield World(tmp_path, signer, market, repo)


@pytest.fixture
def server_settings(tmp_path: Path, skills_root: Path, world: World) -> Settings:
    trusted = tmp_path / "trusted.keys"
    public = (tmp_path / "keys" / "author.pub").read_text()
    trusted.write_text(public + (EXAMPLES / "TEST-KEY-DO-NOT-USE.pub").read_text())
    digest = digest_folder(world.repo)
    served = world.archive("served", "1.0.0")
    world.market.files["/served-1.0.0.tar.gz"] = served.read_bytes()
    world.market.files["/served-1.0.0.tar.gz.sig"] = Path(f"{served}.sig").read_bytes()
    served_digest = json.loads(Path(f"{served}.sig").read_text())["digest"]
    port = world.market.server.server_address[1]

    def entry(pack_id: str, source: str, digest: str) -> dict[str, object]:
        versions = [{"version": "1.0.0", "source": source, "digest": digest}]
        return {"id": pack_id, "versions": versions}

    remote = world.market.publish(
        "/index.json",
        [
            entry("git-path", f"git+{world.repo}", digest),
            entry("credentials", f"http://ada:secret@127.0.0.1:{port}/served-1.0.0.tar.gz", digest),
            entry("served", "served-1.0.0.tar.gz", served_digest),
        ],
    )
    stale = tmp_path / "stale"  # a mirror that has only ops 1.0.0
    stale.mkdir()
    old = world.archive("ops", "1.0.0")
    for path in (old, Path(f"{old}.sig")):
        (stale / path.name).write_bytes(path.read_bytes())
    build_index(stale, Limits())
    return make_settings(
        tmp_path,
        skills_root,
        trusted_pack_keys=str(trusted),
        pack_indexes=(remote, str(stale / "index.json"), str(EXAMPLES / "index.json")),
        pack_allow_http=True,
        pack_keep_seconds=3600,
    )


def install(server: Server, source: str, who: str = "admin") -> httpx.Response:
    return server.call("POST", "/v1/packs", who, json={"source": source})


def upload(server: Server, archive: Path, who: str = "admin", **fields: str) -> httpx.Response:
    files = {"file": (archive.name, archive.read_bytes(), "application/gzip")}
    signature = Path(f"{archive}.sig")
    if signature.exists():
        files["signature"] = (signature.name, signature.read_bytes(), "application/json")
    return server.call("POST", "/v1/packs", who, files=files, data=fields)


def error(answer: httpx.Response) -> tuple[int, str, str]:
    body = answer.json()["error"]
    return answer.status_code, body["code"], body["message"]


def test_a_remote_index_entry_naming_the_servers_host_is_refused(
    server: Server, world: World
) -> None:
    status, code, message = error(install(server, "git-path"))
    assert (status, code) == (502, "invalid_index")
    assert "git-path@1.0.0" in message and "a repository on this host" in message
    status, code, message = error(install(server, "credentials"))
    assert (status, code) == (502, "invalid_index") and "secret" not in message
    assert "/served-1.0.0.tar.gz" not in world.market.paths()
    assert server.call("GET", "/v1/packs").json()["items"] == []
    assert server.store.audit.entries(action="pack.install") == []

    served = install(server, "served")  # a remote source of a remote index: as ever
    assert served.status_code == 201, served.text
    assert served.json()["pack"]["trust"] == "trusted"


def test_a_path_is_refused_without_a_look_at_the_servers_files(
    server: Server, tmp_path: Path
) -> None:
    existing = write_pack(tmp_path / "here", "here")
    for source in (
        str(existing),
        str(tmp_path / "no-such-folder"),
        str(tmp_path / "no-such.git"),
        f"git+{tmp_path}/no-such",
        "./anything",
        "ops-1.0.0.tar.gz",
    ):
        status, code, message = error(install(server, source))
        assert (status, code) == (400, "invalid_request"), (source, message)
        assert "installed with its CLI" in message
    assert server.call("GET", "/v1/packs").json()["items"] == []


def test_a_bare_word_is_a_pack_id_whatever_the_servers_folder_holds(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pack(tmp_path / "cwd" / "ops-basics", "ops-basics", "9.0.0", skills=("impostor",))
    monkeypatch.chdir(tmp_path / "cwd")
    answer = install(server, "ops-basics")
    assert answer.status_code == 201, answer.text
    assert (answer.json()["version"], answer.json()["pack"]["trust"]) == ("1.1.0", "trusted")


def test_a_reinstall_of_kept_files_records_its_own_source_and_caller(
    server: Server, world: World
) -> None:
    unsigned = world.archive("ops", "3.0.0", signed=False)
    first = upload(server, unsigned, allow_unsigned="true")
    assert first.status_code == 201, first.text
    assert server.call("DELETE", "/v1/packs/ops").status_code == 200
    signed = world.archive("ops", "3.0.0")  # the same files, signed, from elsewhere
    renamed = signed.with_name("ops-3.0.0-signed.tar.gz")
    signed.rename(renamed)
    Path(f"{signed}.sig").rename(f"{renamed}.sig")

    again = upload(server, renamed, "admin2")

    assert again.status_code == 201, again.text
    (listed,) = server.call("GET", "/v1/packs").json()["items"]
    assert listed["digest"] == first.json()["pack"]["digest"]
    assert (listed["source"], listed["trust"]) == ("upload:ops-3.0.0-signed.tar.gz", "trusted")
    assert (listed["installed_by"], listed["signer"]) == ("admin2", world.signer.fingerprint)
    assert listed["installed_at"] > first.json()["pack"]["installed_at"]
    new, old = server.store.audit.entries(action="pack.install")
    assert (new["actor"], new["data"]["trust"]) == ("admin2", "trusted")
    assert (old["actor"], old["data"]["trust"]) == ("admin", "unsigned")


def test_an_unpinned_id_never_goes_back_to_what_a_stale_index_offers(
    server: Server, world: World
) -> None:
    assert upload(server, world.archive("ops", "2.0.0")).status_code == 201

    status, code, message = error(install(server, "ops"))

    assert (status, code) == (409, "conflict")
    assert "older than the active 2.0.0" in message
    assert server.call("GET", "/v1/packs/ops").json()["version"] == "2.0.0"
    upgrade = server.call("POST", "/v1/packs/ops/upgrade", json={})
    assert upgrade.status_code == 200 and upgrade.json()["action"] == "unchanged"
    assert any("older than the active 2.0.0" in w for w in upgrade.json()["warnings"])
    pinned = install(server, "ops@1.0.0")
    assert (pinned.status_code, pinned.json()["action"]) == (201, "downgrade")
