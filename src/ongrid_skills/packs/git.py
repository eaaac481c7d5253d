"""Fetching a pack from a git repository: a shallow clone that runs nothing of the repository's.

``git clone --depth 1 --single-branch --no-tags [--branch REF] -- URL DIR``, and:

- **no hooks** — ``-c core.hooksPath=/dev/null``: no hook runs, whatever a template, a config
  or the repository provides;
- **no submodules** — ``--no-recurse-submodules``, ``submodule.recurse=false``;
- **no transport that runs commands** — ``protocol.ext.allow=never``; the URL must be
  ``https://``, ``ssh://``, ``git@host:path`` (scp-like), ``file://`` or a path (``http://``
  and ``git://`` only when plain http is allowed), and may not start with ``-``;
- **a clean environment** — ``PATH``, ``HOME``, the proxy variables and the ssh agent socket,
  nothing else; no system or global git config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL``
  = /dev/null), no terminal prompt (``GIT_TERMINAL_PROMPT=0``, ssh in batch mode);
- **a time limit** — the whole clone, after which git's process group is killed.

What was cloned is then staged like any folder (:mod:`.source`): ``.git`` is left out, links
and special files refuse the pack, the limits of files and bytes apply. This module spawns git
and nothing else; it must never pass a URL where git could read it as an option.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ongrid_skills.errors import FetchFailed
from ongrid_skills.packs.fetch import shown_url

GIT_PREFIX = "git+"
#: What ``@REF`` may be: a branch or tag name without ``/``, or a commit's hex.
_REF_RE = re.compile(r"[A-Za-z0-9._+-]+")
#: scp-like ssh addresses: ``git@github.com:org/repo.git``.
_SCP_RE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:.+")
_PASSED_ENV = (
    "PATH",
    "HOME",
    "SSH_AUTH_SOCK",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
_GIT_CONFIG = (
    "core.hooksPath=/dev/null",
    "protocol.ext.allow=never",
    "submodule.recurse=false",
    "transfer.fsckObjects=true",
    "core.autocrlf=false",
    "core.symlinks=true",
    "advice.detachedHead=false",
)


@dataclass(frozen=True, slots=True)
class GitSource:
    """A repository to clone (``url`` as git takes it) and the ``ref`` to check out."""

    url: str
    ref: str | None = None
    local: bool = False  # a path or file:// on this host (not a remote source)

    @property
    def shown(self) -> str:
        """The source as recorded: ``git+URL[@REF]``, without credentials."""
        url = shown_url(self.url) if "://" in self.url else self.url
        return f"{GIT_PREFIX}{url}" + (f"@{self.ref}" if self.ref else "")


def looks_like_git(text: str) -> bool:
    """Whether a source names a git repository: ``git+…``, ``ssh://…``, ``git@host:…``, or a
    URL or path ending in ``.git`` (optionally followed by ``@REF``)."""
    if text.startswith(GIT_PREFIX) or text.lower().startswith(("ssh://", "git://")):
        return True
    if _SCP_RE.fullmatch(text):
        return True
    base, _ref = split_ref(text)
    return base.rstrip("/").endswith(".git")


def is_scp_like(text: str) -> bool:
    """``user@host:path``: git's scp-like ssh address (no scheme)."""
    return _SCP_RE.fullmatch(text) is not None


def is_local_git(text: str) -> bool:
    """Whether a git source names a repository of this host (``file://`` or a path), told from
    its text alone: nothing is looked up, so a source that must be remote is refused before
    anything of this host is touched."""
    body = text[len(GIT_PREFIX) :] if text.startswith(GIT_PREFIX) else text
    url, _ref = split_ref(body)
    if url.lower().startswith("file:"):
        return True
    return "://" not in url and not is_scp_like(url)


def split_ref(text: str) -> tuple[str, str | None]:
    """``(url, ref)`` of ``URL@REF``: the ``@`` after the last ``/`` introduces a ref (so a
    ref holds no ``/``, and ``user@host`` of a URL is never one)."""
    slash = text.rfind("/")
    at = text.rfind("@")
    if at > slash and at > 0:
        ref = text[at + 1 :]
        if _REF_RE.fullmatch(ref):  # "host:repo.git" of git@host:repo.git is no ref
            return text[:at], ref
    return text, None


def parse_git(text: str, *, allow_http: bool = False) -> GitSource:
    """The repository a git source names; FetchFailed for a URL git may not take."""
    body = text[len(GIT_PREFIX) :] if text.startswith(GIT_PREFIX) else text
    url, ref = split_ref(body)
    if not url or url.startswith("-"):
        raise FetchFailed(f"{text}: not a git URL")
    lowered = url.lower()
    if "::" in url.split("/", 1)[0]:  # transport::address (ext::sh -c …)
        raise FetchFailed(f"{text}: git transports (TRANSPORT::address) are not allowed")
    if lowered.startswith(("http://", "git://")) and not allow_http:
        raise FetchFailed(
            f"{text}: plain http:// and git:// are not allowed (ONGRID_PACK_ALLOW_HTTP=1)"
        )
    if lowered.startswith("file://"):
        return GitSource(url, ref, local=True)
    if "://" in url:
        if not lowered.startswith(("https://", "ssh://", "http://", "git://")):
            raise FetchFailed(f"{text}: a git URL must be https://, ssh:// or file://")
        return GitSource(url, ref)
    if _SCP_RE.fullmatch(url):
        return GitSource(url, ref)
    path = os.path.abspath(url)
    if not os.path.isdir(path):
        raise FetchFailed(f"{text}: no such git repository")
    return GitSource("file://" + path, ref, local=True)


def clone(source: GitSource, target: Path, *, timeout: float) -> Path:
    """Clone ``source`` into ``target`` (which must not exist); FetchFailed on any failure."""
    command = ["git"]
    for setting in _GIT_CONFIG:
        command += ["-c", setting]
    command += ["clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags"]
    command += ["--no-recurse-submodules"]
    if source.ref:
        command += ["--branch", source.ref]
    command += ["--", source.url, str(target)]
    env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_SSH_COMMAND="ssh -o BatchMode=yes",
        LC_ALL="C",
    )
    env.setdefault("PATH", os.defpath)
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: a timeout kills ssh too
        )
    except OSError as exc:
        raise FetchFailed(f"cannot run git: {exc.strerror or exc}") from None
    try:
        _out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise FetchFailed(f"{source.shown}: git clone took longer than {timeout:g} s") from None
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        last = (err or b"").decode("utf-8", "replace").strip().splitlines()[-3:]
        why = "; ".join(line.strip() for line in last) or f"exit status {proc.returncode}"
        raise FetchFailed(f"{source.shown}: git clone failed: {why}")
    return target


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()  # reaps it and closes its pipe
