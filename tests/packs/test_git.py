"""Packs from git: a real repository made by the test, cloned shallow at a ref, with a hook
that would write a file (it must not run), transports that run commands refused, a time limit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ongrid_skills.errors import ConfigError, FetchFailed, InvalidRequest, NotFound
from ongrid_skills.packs.fetch import FetchPolicy
from ongrid_skills.packs.git import clone, looks_like_git, parse_git, split_ref
from ongrid_skills.packs.index import Catalog
from ongrid_skills.packs.sources import SourcePolicy, obtain, shorthand
from ongrid_skills.settings import Settings
from tests.support.packs import write_pack

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def git(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [*GIT, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def make_repo(base: Path) -> Path:
    """A repository holding pack ``ops`` 1.0.0 (tag v1) then 2.0.0 (main)."""
    repo = base / "ops.git-src"
    write_pack(repo, "ops", "1.0.0")
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "one", cwd=repo)
    git("tag", "v1", cwd=repo)
    write_pack(repo, "ops", "2.0.0")
    git("commit", "-q", "-am", "two", cwd=repo)
    return repo


def version_in(folder: Path) -> str:
    import json

    return str(json.loads((folder / "pack.json").read_text())["version"])


def test_a_git_source_is_cloned_shallow_at_its_ref(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    head = clone(parse_git(f"git+{repo}"), tmp_path / "head", timeout=60)
    tagged = clone(parse_git(f"git+{repo}@v1"), tmp_path / "tagged", timeout=60)
    assert version_in(head) == "2.0.0"
    assert version_in(tagged) == "1.0.0"
    assert git("rev-list", "--count", "HEAD", cwd=head).strip() == "1"  # shallow


def test_no_hook_runs_even_when_git_would_run_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    marker = tmp_path / "hook-ran"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    hook = hooks / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {hooks}\n")
    hostile = {**os.environ, "HOME": str(home), "GIT_TEMPLATE_DIR": str(tmp_path / "tpl")}
    (tmp_path / "tpl" / "hooks").mkdir(parents=True)
    (tmp_path / "tpl" / "hooks" / "post-checkout").write_text(hook.read_text())
    (tmp_path / "tpl" / "hooks" / "post-checkout").chmod(0o755)
    # The control: a plain clone in this environment runs the hook.
    git("clone", "-q", str(repo), str(tmp_path / "plain"), cwd=tmp_path, env=hostile)
    assert marker.exists()
    marker.unlink()

    old = dict(os.environ)
    os.environ.update(HOME=str(home), GIT_TEMPLATE_DIR=str(tmp_path / "tpl"))
    try:
        clone(parse_git(f"git+{repo}"), tmp_path / "ours", timeout=60)
    finally:
        os.environ.clear()
        os.environ.update(old)

    assert (tmp_path / "ours" / "pack.json").exists()
    assert not marker.exists()


def test_transports_that_run_commands_and_option_like_urls_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(FetchFailed, match="transports"):
        parse_git(f"git+ext::sh -c touch% {marker}")
    with pytest.raises(FetchFailed, match="not a git URL"):
        parse_git("git+--upload-pack=touch /tmp/x")
    with pytest.raises(FetchFailed, match="http:// and git:// are not allowed"):
        parse_git("git+http://example.com/r.git")
    assert not marker.exists()


def test_a_clone_over_its_time_limit_is_killed(tmp_path: Path) -> None:
    # A "server" that accepts the connection and never answers: an ssh command that sleeps.
    slow = tmp_path / "slow-ssh"
    slow.write_text("#!/bin/sh\nexec sleep 600\n")
    slow.chmod(0o755)
    old = dict(os.environ)
    os.environ["PATH"] = f"{tmp_path}:{old['PATH']}"
    (tmp_path / "ssh").symlink_to(slow)
    try:
        with pytest.raises(FetchFailed, match="took longer than 1 s"):
            clone(parse_git("ssh://example.invalid/r.git"), tmp_path / "c", timeout=1)
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_git_sources_are_told_from_paths_and_urls() -> None:
    assert split_ref("https://h/o/r.git@v1.2.0") == ("https://h/o/r.git", "v1.2.0")
    assert split_ref("git@github.com:org/repo.git@main") == ("git@github.com:org/repo.git", "main")
    assert split_ref("https://user@host/r.git") == ("https://user@host/r.git", None)
    assert looks_like_git("git@github.com:org/repo.git")
    assert looks_like_git("https://example.com/org/repo.git@v2")
    assert not looks_like_git("https://example.com/ops-1.0.0.tar.gz")


def test_a_local_repository_is_a_local_source_and_a_remote_one_is_remote(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    policy = SourcePolicy(FetchPolicy(10**7), git_timeout=60)
    candidate = obtain(f"git+{repo}@v1", work, policy, Catalog)
    assert not candidate.remote
    assert candidate.source == f"git+file://{repo}@v1"
    assert version_in(candidate.path) == "1.0.0"
    assert parse_git("https://example.com/r.git").local is False


FORGE = "https://127.0.0.1:9"  # loopback, nothing listens: git itself says it cannot connect


def test_owner_repo_is_a_git_source_of_the_configured_forge_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    off = SourcePolicy(FetchPolicy(10**7), git_timeout=30)
    with pytest.raises(NotFound, match="needs ONGRID_PACK_GIT_FORGE"):
        obtain("acme/ops-pack@v1.2.0", work, off, Catalog)  # a path while no forge is set
    on = SourcePolicy(FetchPolicy(10**7), git_timeout=30, forge=FORGE)
    with pytest.raises(FetchFailed) as info:
        obtain("acme/ops-pack@v1.2.0", work, on, Catalog)
    assert info.value.message.startswith(
        f"git+{FORGE}/acme/ops-pack.git@v1.2.0: git clone failed: "
    )
    assert shorthand("acme/ops-pack.tar.gz", FORGE) is None  # an archive is a path


def test_owner_repo_that_is_also_a_folder_here_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_pack(tmp_path / "acme" / "ops-pack", "ops")
    (tmp_path / "work").mkdir()
    on = SourcePolicy(FetchPolicy(10**7), git_timeout=30, forge=FORGE)
    with pytest.raises(InvalidRequest) as info:
        obtain("acme/ops-pack", tmp_path / "work", on, Catalog)
    assert "./acme/ops-pack" in info.value.message
    assert f"git+{FORGE}/acme/ops-pack.git" in info.value.message
    assert obtain("./acme/ops-pack", tmp_path / "work", on, Catalog).remote is False


def test_the_forge_setting_is_an_https_url_or_nothing() -> None:
    assert Settings.load({"ONGRID_PACK_GIT_FORGE": "https://github.com/"}).pack_git_forge == (
        "https://github.com"
    )
    assert Settings.load({}).pack_git_forge is None
    with pytest.raises(ConfigError, match="must be an https:// URL"):
        Settings.load({"ONGRID_PACK_GIT_FORGE": "github.com"})
