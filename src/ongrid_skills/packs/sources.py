"""Where a pack comes from: a SOURCE as typed (or posted) → a :class:`Candidate` on this host.

Tried in this order:

1. a **git** source — ``git+URL``, ``ssh://…``, ``git@host:path``, or a URL or path ending in
   ``.git``, each optionally followed by ``@REF`` — cloned shallow (:mod:`.git`);
2. an ``https://`` **URL** of an archive — downloaded within the limits (:mod:`.fetch`), with
   ``URL.sig`` beside it when the server has one;
3. an existing **path** — a folder, or an archive file (with ``ARCHIVE.sig`` beside it);
4. a **pack id** — ``ID`` or ``ID@VERSION``, resolved through the marketplace indexes
   (:mod:`.index`); the candidate then carries the digest (and signer) the index names.

URLs, git remotes and index entries that are URLs are *remote*: the installer requires them to
be signed by a trusted key unless allowed otherwise. A folder, an archive file or a git
repository on this host is *local*. ``local=False`` refuses sources on this host (the REST
door takes only remote sources and index ids: a path of the server is for its CLI). Everything
fetched is written under ``work``, and nowhere else.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ongrid_skills.errors import InvalidRequest, NotFound
from ongrid_skills.packs.fetch import FetchPolicy, download, is_url, shown_url
from ongrid_skills.packs.git import clone, looks_like_git, parse_git
from ongrid_skills.packs.index import Catalog, IndexVersion
from ongrid_skills.packs.install import Candidate
from ongrid_skills.packs.manifest import ID_RE, is_version
from ongrid_skills.packs.signature import SIGNATURE_SUFFIX
from ongrid_skills.packs.source import archive_stem, is_archive_name

_SPEC_RE = re.compile(r"(?P<id>[a-z0-9_.-]+)(?:@(?P<version>\S+))?")


@dataclass(frozen=True, slots=True)
class SourcePolicy:
    """How sources are fetched: the download limits, the git clone's time, whether sources on
    this host are accepted."""

    fetch: FetchPolicy
    git_timeout: float = 300.0
    local: bool = True


def obtain(
    text: str, work: Path, policy: SourcePolicy, catalog: Callable[[], Catalog]
) -> Candidate:
    """The candidate ``text`` names, fetched into ``work`` when remote."""
    text = text.strip()
    if not text:
        raise InvalidRequest("no source given")
    if looks_like_git(text) and not _is_plain_path(text):
        return _git(text, work, policy)
    if is_url(text):
        return _url(text, work, policy)
    path = Path(text).expanduser()
    if path.exists():
        if not policy.local:
            raise InvalidRequest(
                f"{text}: a path on the server is installed with its CLI (ongrid-skills pack "
                "install); give a URL, a git URL or a pack id"
            )
        return Candidate(path, str(path.resolve()), remote=False)
    spec = _SPEC_RE.fullmatch(text)
    if spec is not None and ID_RE.fullmatch(spec["id"]):
        version = spec["version"]
        if version is not None and not is_version(version):
            raise InvalidRequest(f"{text}: {version!r} is not a semantic version")
        return from_index(catalog().resolve(spec["id"], version), work, policy)
    raise NotFound(f"{text}: not a folder, an archive, an https:// URL, a git source or a pack id")


def from_index(entry: IndexVersion, work: Path, policy: SourcePolicy) -> Candidate:
    """The candidate of an index entry: fetched from its source, bound to its digest."""
    inner = SourcePolicy(policy.fetch, policy.git_timeout, local=True)  # the operator's index
    source = entry.source
    if looks_like_git(source) and not _is_plain_path(source):
        found = _git(source, work, inner)
    elif is_url(source):
        found = _url(source, work, inner)
    else:
        path = Path(source)
        if not path.exists():
            raise NotFound(f"{entry.label}: the index's source {source} does not exist")
        found = Candidate(path, str(path), remote=False)
    return replace(found, digest=entry.digest, signer=entry.signer, via=entry.index)


def _git(text: str, work: Path, policy: SourcePolicy) -> Candidate:
    source = parse_git(text, allow_http=policy.fetch.allow_http)
    if source.local and not policy.local:
        raise InvalidRequest(f"{text}: a repository on the server is installed with its CLI")
    target = clone(source, work / "clone", timeout=policy.git_timeout)
    name = source.url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
    return Candidate(target, source.shown, remote=not source.local, name=name or None)


def _url(url: str, work: Path, policy: SourcePolicy) -> Candidate:
    policy.fetch.check_url(url)
    parts = urllib.parse.urlsplit(url)
    last = Path(urllib.parse.unquote(parts.path)).name
    name = last if is_archive_name(Path(last)) and "/" not in last else "pack.tar.gz"
    target = work / name
    download(url, target, policy.fetch)
    signature = None
    if not parts.query:  # a signed URL (a query with a token) has no .sig beside it to guess
        sig_url = urllib.parse.urlunsplit(parts._replace(path=parts.path + SIGNATURE_SUFFIX))
        sig_target = work / (name + SIGNATURE_SUFFIX)
        small = FetchPolicy(64 * 1024, policy.fetch.timeout, policy.fetch.allow_http)
        if download(sig_url, sig_target, small, missing_ok=True):
            signature = sig_target
    stem = archive_stem(Path(name))
    return Candidate(target, shown_url(url), remote=True, signature=signature, name=stem)


def _is_plain_path(text: str) -> bool:
    """A folder or archive of this host that merely ends in ``.git`` is not a git source
    unless it is a repository (a bare one, or a checkout) or the text says ``git+``."""
    if text.startswith("git+") or "://" in text:
        return False
    path = Path(text).expanduser()
    if not path.exists():
        return False
    return not ((path / "HEAD").is_file() or (path / ".git").exists())
