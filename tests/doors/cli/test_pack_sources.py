"""Where ``ongrid-skills pack install`` takes a pack from, as the console script: a remote index
never names a source of this host, every install records its own source, a bare word is a pack
id whatever the current folder holds, and an unpinned id never goes back to an older version."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.digest import digest_folder
from ongrid_skills.packs.keys import SigningKey, load_signing_key
from ongrid_skills.packs.trust import sign_path
from ongrid_skills.store import open_store
from tests.support.index_server import IndexServer, index_server
from tests.support.packs import make_key, tree, write_pack
from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS

EXAMPLES = EXAMPLE_SKILLS.parent / "packs"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@dataclass
class Cli:
    base: Path
    env: dict[str, str]
    signer: SigningKey

    @property
    def data_dir(self) -> Path:
        return Path(self.env["ONGRID_DATA_DIR"])

    def run(
        self, *args: str, cwd: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, "-q", *args],
            capture_output=True,
            text=True,
            env={**self.env, **env},
            cwd=cwd or self.base,
            timeout=120,
            check=False,
        )

    def json(self, *args: str, **env: str) -> Any:
        done = self.run(*args, "--json", **env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def refused(self, *args: str, cwd: Path | None = None, **env: str) -> tuple[int, str, str]:
        """(exit status, error code, message) of a command that must fail."""
        done = self.run(*args, "--json", cwd=cwd, **env)
        assert done.returncode != 0, done.stdout
        error = json.loads(done.stdout)["error"]
        return done.returncode, error["code"], error["message"]

    def audit(self, action: str) -> list[dict[str, Any]]:
        store = open_store(str(self.data_dir))
        try:
            return store.audit.entries(action=action, limit=1000)
        finally:
            store.close()

    def installed(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self.json("pack", "list")
        return listed

    def signed_archive(self, pack_id: str, version: str = "1.0.0", **kw: Any) -> Path:
        folder = write_pack(self.base / "src" / f"{pack_id}-{version}", pack_id, version, **kw)
        out = self.base / "out" / f"{pack_id}-{version}"
        out.mkdir(parents=True)
        archive = build_archive(folder, out).path
        sign_path(archive, self.signer)
        return archive


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    key = make_key(tmp_path / "keys", "author")
    trusted = tmp_path / "trusted.keys"
    trusted.write_text(key.public.read_text() + (EXAMPLES / "TEST-KEY-DO-NOT-USE.pub").read_text())
    skills = tmp_path / "skills"
    skills.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_TRUSTED_PACK_KEYS": str(trusted),
        "ONGRID_PACK_ALLOW_HTTP": "1",  # the marketplace of these tests is plain http on loopback
        "ONGRID_PACK_KEEP_SECONDS": "3600",  # a removed version's files stay: they may be reused
    }
    return Cli(tmp_path, env, load_signing_key(key.private))


def signed_repo(folder: Path, pack_id: str, signer: SigningKey) -> tuple[Path, str]:
    """A git repository of this host holding a pack signed by a trusted key; its digest."""
    write_pack(folder, pack_id)
    sign_path(folder, signer)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "one")):
        subprocess.run([*GIT, *args], cwd=folder, check=True, capture_output=True, timeout=60)
    return folder, digest_folder(folder)


def entry(pack_id: str, source: str, digest: str) -> dict[str, Any]:
    return {"id": pack_id, "versions": [{"version": "1.0.0", "source": source, "digest": digest}]}


@pytest.fixture
def market() -> Iterator[IndexServer]:
    with index_server() as running:
        yield running


def test_a_remote_index_never_installs_a_source_of_this_host(cli: Cli, market: IndexServer) -> None:
    repo, repo_digest = signed_repo(cli.base / "repo", "hostile-git", cli.signer)
    archive = cli.signed_archive("hostile-file")
    local = build_archive(write_pack(cli.base / "plain", "plain"), cli.base / "out").path
    served = cli.signed_archive("served")
    market.files["/served-1.0.0.tar.gz"] = served.read_bytes()
    market.files["/served-1.0.0.tar.gz.sig"] = Path(f"{served}.sig").read_bytes()
    archive_digest = json.loads(Path(f"{archive}.sig").read_text())["digest"]
    served_digest = json.loads(Path(f"{served}.sig").read_text())["digest"]
    port = market.server.server_address[1]
    index = market.publish(
        "/m/index.json",
        [
            entry("git-path", f"git+{repo}", repo_digest),
            entry("git-file", f"git+file://{repo}", repo_digest),
            entry("file-url", f"file://{archive}", archive_digest),
            entry("file-plain", f"file://{local}", archive_digest),
            entry("bare-path", str(archive), archive_digest),
            entry("relative", "../../../elsewhere/hostile-file-1.0.0.tar.gz", archive_digest),
            entry(
                "credentials",
                f"http://ada:secret@127.0.0.1:{port}/served-1.0.0.tar.gz",
                served_digest,
            ),
        ],
    )
    env = {"ONGRID_PACK_INDEXES": index}

    for pack_id in ("git-path", "git-file", "file-url", "file-plain"):
        status, code, message = cli.refused("pack", "install", pack_id, **env)
        assert (status, code) == (2, "invalid_index"), (pack_id, message)
        assert f"{pack_id}@1.0.0" in message and index in message
        assert "a remote index may only name" in message
    status, code, message = cli.refused("pack", "install", "credentials", **env)
    assert (status, code) == (2, "invalid_index") and "credentials" in message
    assert "secret" not in message
    assert "/served-1.0.0.tar.gz" not in market.paths()  # refused before any request

    # Paths resolve against the index's URL: asked of its server, never read on this host.
    for pack_id, asked in (("bare-path", str(archive)), ("relative", "/elsewhere/")):
        status, code, _message = cli.refused("pack", "install", pack_id, **env)
        assert (status, code) == (1, "fetch_failed")
        assert any(path.startswith(asked) for path in market.paths()), market.paths()

    assert cli.installed() == []
    assert cli.audit("pack.install") == []
    assert tree(cli.data_dir / "packs" / ".staging") == []


def test_a_local_index_may_still_name_a_repository_of_this_host(cli: Cli) -> None:
    repo, digest = signed_repo(cli.base / "repo", "mine", cli.signer)
    index = cli.base / "index.json"
    index.write_text(json.dumps({"packs": [entry("mine", f"git+{repo}", digest)]}))
    installed = cli.json("pack", "install", "mine", ONGRID_PACK_INDEXES=str(index))
    assert (installed["action"], installed["pack"]["trust"]) == ("install", "trusted")
    assert installed["pack"]["source"] == f"git+file://{repo}"


def test_a_reinstall_of_kept_files_records_its_own_source_signer_trust_and_time(cli: Cli) -> None:
    folder = write_pack(cli.base / "ops", "ops", skills=("probe",))
    first = cli.json("pack", "install", str(folder))["pack"]
    assert (first["source"], first["trust"], first["signer"]) == (str(folder), "unsigned", None)
    assert cli.run("pack", "remove", "ops").returncode == 0
    assert (cli.data_dir / "packs" / "ops" / "1.0.0").is_dir()  # kept: a call may still run
    archive = build_archive(folder, cli.base).path  # the same files: the same digest
    sign_path(archive, cli.signer)

    again = cli.json("pack", "install", str(archive))

    assert again["action"] == "install" and again["pack"]["digest"] == first["digest"]
    (listed,) = cli.installed()
    shown = cli.json("pack", "show", "ops")
    for view in (again["pack"], listed, shown):
        assert (view["source"], view["trust"]) == (str(archive), "trusted")
        assert view["signer"] == cli.signer.fingerprint
        assert view["installed_at"] > first["installed_at"]
    assert shown["versions"][0]["installed_at"] == listed["installed_at"]
    new, old = cli.audit("pack.install")  # newest first
    assert (old["data"]["source"], old["data"]["trust"]) == (str(folder), "unsigned")
    assert (new["data"]["source"], new["data"]["trust"]) == (str(archive), "trusted")
    assert new["data"]["signer"] == cli.signer.fingerprint


def test_a_bare_word_is_a_pack_id_whatever_the_current_folder_holds(cli: Cli) -> None:
    here = cli.base / "work"
    write_pack(here / "ops-basics", "ops-basics", "9.0.0", skills=("impostor",))
    write_pack(here / "mine", "mine", skills=("own",))
    env = {"ONGRID_PACK_INDEXES": str(EXAMPLES / "index.json")}

    status, code, message = cli.refused("pack", "install", "ops-basics", cwd=here, **env)
    assert (status, code) == (2, "invalid_request")
    assert "ambiguous" in message and "./ops-basics" in message
    assert "ops-basics@1.1.0" in message and str(EXAMPLES / "index.json") in message
    status, code, message = cli.refused("pack", "install", "mine", cwd=here, **env)
    assert (status, code) == (2, "not_found") and "write ./mine" in message
    assert cli.installed() == []

    elsewhere = cli.json("pack", "install", "ops-basics", **env)  # no such folder here
    assert (elsewhere["version"], elsewhere["pack"]["trust"]) == ("1.1.0", "trusted")
    assert cli.run("pack", "remove", "ops-basics", **env).returncode == 0
    folder = cli.run("pack", "install", "./ops-basics", "--json", cwd=here, **env)
    assert folder.returncode == 0, folder.stderr
    assert json.loads(folder.stdout)["pack"]["source"] == str(here / "ops-basics")
    archive = build_archive(here / "mine", here).path
    by_name = cli.run("pack", "install", archive.name, "--json", cwd=here, **env)
    assert by_name.returncode == 0, by_name.stderr  # an archive's name says it is a file
    assert {p["id"] for p in cli.installed()} == {"ops-basics", "mine"}


def test_an_unpinned_install_never_goes_back_to_what_a_stale_index_offers(cli: Cli) -> None:
    market = cli.base / "market"
    market.mkdir()
    old = cli.signed_archive("ops", "1.0.0")
    for path in (old, Path(f"{old}.sig")):
        (market / path.name).write_bytes(path.read_bytes())
    assert cli.run("pack", "index", "build", str(market)).returncode == 0
    env = {"ONGRID_PACK_INDEXES": str(market / "index.json")}
    newer = cli.signed_archive("ops", "2.0.0")
    assert cli.json("pack", "install", str(newer))["version"] == "2.0.0"

    status, code, message = cli.refused("pack", "install", "ops", **env)

    assert (status, code) == (2, "conflict")
    assert "1.0.0 at most, older than the active 2.0.0" in message
    assert "nothing changed" in message and "ops@1.0.0" in message
    (listed,) = cli.installed()
    assert (listed["version"], listed["source"]) == ("2.0.0", str(newer))
    assert cli.audit("pack.downgrade") == []
    upgrade = cli.run("pack", "upgrade", "ops", **env)
    assert upgrade.returncode == 0 and "nothing changed" in upgrade.stdout
    assert "older than the active 2.0.0" in upgrade.stderr  # the same rule, said the same way
    pinned = cli.json("pack", "install", "ops@1.0.0", **env)  # going back on purpose
    assert (pinned["action"], pinned["version"]) == ("downgrade", "1.0.0")
