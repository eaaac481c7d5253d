"""Where a pack comes from: a SOURCE as typed (or posted) → a :class:`Candidate` on this host.

What a SOURCE is is told by its text alone, never by what the current folder holds, in this
order (:func:`kind_of`):

1. a **git** source — ``git+URL``, ``ssh://…``, ``git@host:path``, or a URL or path ending in
   ``.git``, each optionally followed by ``@REF`` — cloned shallow (:mod:`.git`); and, only
   when the operator configured a forge (``ONGRID_PACK_GIT_FORGE``), ``owner/repo[@REF]`` on
   it (:func:`shorthand`): a folder of that name on this host makes it ambiguous, refused
   naming both, never guessed;
2. an ``https://`` **URL** of an archive — downloaded within the limits (:mod:`.fetch`), with
   ``URL.sig`` beside it when the server has one;
3. a **path** — text that looks like one: it starts with ``/``, ``~`` or ``.`` (``./ops``,
   ``../x``), holds a ``/``, or ends in ``.tar.gz``, ``.tgz`` or ``.zip``: a folder, or an
   archive file (with ``ARCHIVE.sig`` beside it);
4. a **pack id** — any other word, ``ID`` or ``ID@VERSION``, resolved through the marketplace
   indexes (:mod:`.index`); the candidate then carries the digest (and signer) the index names.
   A bare word that also names a file or folder of the current folder is refused, naming both
   (:func:`resolve`): ``ops-basics`` never silently becomes ``./ops-basics``.

URLs, git remotes, and every entry of an index read from a URL are *remote*: the installer
requires them to be signed by a trusted key unless allowed otherwise. A remote index's entry
must name a remote source (:func:`from_index`). A folder, an archive file or a git repository
on this host is *local*. ``local=False`` refuses sources on this host without looking at them
(the REST door takes only remote sources and index ids: a path of the server is for its CLI).
Everything fetched is written under ``work``, and nowhere else.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ongrid_skills.errors import InvalidRequest, NotFound, PackIndexError
from ongrid_skills.packs.fetch import FetchPolicy, download, is_url, shown_url
from ongrid_skills.packs.git import GIT_PREFIX, clone, is_local_git, looks_like_git, parse_git
from ongrid_skills.packs.index import Catalog, IndexVersion
from ongrid_skills.packs.install import Candidate
from ongrid_skills.packs.manifest import ID_RE, is_version
from ongrid_skills.packs.signature import SIGNATURE_SUFFIX
from ongrid_skills.packs.source import archive_stem, is_archive_name

_SPEC_RE = re.compile(r"(?P<id>[a-z0-9_.-]+)(?:@(?P<version>\S+))?")
#: ``owner/repo[@ref]`` of a configured forge (owner and repo as forges allow them).
_SHORTHAND_RE = re.compile(
    r"(?P<owner>[A-Za-z0-9][A-Za-z0-9_.-]{0,99})/(?P<repo>[A-Za-z0-9_.-]{1,100}?)(?:\.git)?"
    r"(?:@(?P<ref>[A-Za-z0-9._+-]{1,200}))?"
)
_ON_SERVER = (
    "a path on the server is installed with its CLI (ongrid-skills pack install); give a URL, "
    "a git URL or a pack id"
)


@dataclass(frozen=True, slots=True)
class SourcePolicy:
    """How sources are fetched: the download limits, the git clone's time, whether sources on
    this host are accepted."""

    fetch: FetchPolicy
    git_timeout: float = 300.0
    local: bool = True
    #: The forge ``owner/repo[@ref]`` names (``https://github.com``); None: no shorthand.
    forge: str | None = None


@dataclass(frozen=True, slots=True)
class PackRef:
    """A pack id as typed: ``ID`` or ``ID@VERSION`` (``version`` None: the newest release);
    ``here`` is ``./TEXT`` when the current folder holds a file or folder of that name."""

    pack_id: str
    version: str | None
    text: str
    here: str | None = None


def looks_like_path(text: str) -> bool:
    """Whether ``text`` says it is a path: ``/…``, ``~…``, ``.…`` (``./x``, ``../x``), holds a
    ``/``, or ends in an archive suffix. A pack id never does (ids hold no ``/`` and never
    start with ``.``)."""
    return text.startswith(("/", "~", ".")) or "/" in text or is_archive_name(Path(text))


def shorthand(text: str, forge: str | None) -> str | None:
    """The git source ``owner/repo[@ref]`` names on ``forge`` (``git+FORGE/owner/repo.git``),
    or None: no forge configured, or text of another shape (an archive name is a path).

    >>> shorthand("acme/ops-pack@v1.2.0", "https://github.com")
    'git+https://github.com/acme/ops-pack.git@v1.2.0'
    >>> shorthand("acme/ops-pack", None) is None
    True
    """
    if forge is None or is_archive_name(Path(text)):
        return None
    match = _SHORTHAND_RE.fullmatch(text)
    if match is None or match["repo"] in (".", ".."):
        return None
    ref = f"@{match['ref']}" if match["ref"] else ""
    return f"{GIT_PREFIX}{forge}/{match['owner']}/{match['repo']}.git{ref}"


def kind_of(text: str, *, local: bool = True, forge: str | None = None) -> str:
    """``git``, ``url``, ``path`` or ``id``: what ``text`` names (see the module's docstring).
    Only a ``.git`` path that exists and is no repository is looked at (when ``local``)."""
    if looks_like_git(text) and not (local and _is_plain_path(text)):
        return "git"
    if shorthand(text, forge) is not None:
        return "shorthand"
    if is_url(text):
        return "url"
    if looks_like_path(text):
        return "path"
    return "id"


def pack_ref(text: str, policy: SourcePolicy) -> PackRef | None:
    """The pack id ``text`` names, or None when it names a git source, a URL or a path."""
    text = text.strip()
    if not text:
        raise InvalidRequest("no source given")
    if kind_of(text, local=policy.local, forge=policy.forge) != "id":
        return None
    spec = _SPEC_RE.fullmatch(text)
    if spec is None or not ID_RE.fullmatch(spec["id"]):
        hint = f" (a path must look like one: ./{text})" if policy.local else ""
        raise NotFound(f"{text}: not a pack id, an https:// URL, a git source or a path{hint}")
    version = spec["version"]
    if version is not None and not is_version(version):
        raise InvalidRequest(f"{text}: {version!r} is not a semantic version")
    here = f"./{text}" if policy.local and os.path.lexists(text) else None
    return PackRef(spec["id"], version, text, here)


def resolve(ref: PackRef, catalog: Catalog) -> IndexVersion:
    """The index entry ``ref`` names. A bare word that is also a file or folder of the current
    folder is refused naming both (InvalidRequest), or, when no index lists it, NotFound
    saying how to name the folder: its meaning never depends on the current folder."""
    try:
        entry = catalog.resolve(ref.pack_id, ref.version)
    except NotFound as exc:
        if ref.here is None:
            raise
        raise NotFound(
            f"{exc.message}; {ref.here} is not taken for it (a bare word is a pack id): "
            f"write {ref.here} to install it"
        ) from None
    if ref.here is not None:
        raise InvalidRequest(
            f"{ref.text} is ambiguous: the pack {entry.label} of the index {entry.index}, and "
            f"{ref.here} in the current folder; write {ref.here} to install the folder or "
            f"file, or {entry.label} (from another folder: {ref.text}) for the index's pack"
        )
    return entry


def obtain(
    text: str, work: Path, policy: SourcePolicy, catalog: Callable[[], Catalog]
) -> Candidate:
    """The candidate ``text`` names, fetched into ``work`` when remote."""
    ref = pack_ref(text, policy)
    if ref is not None:
        return from_index(resolve(ref, catalog()), work, policy)
    return fetch_source(text.strip(), work, policy)


def fetch_source(text: str, work: Path, policy: SourcePolicy) -> Candidate:
    """The candidate of a git source, a URL or a path (not a pack id)."""
    kind = kind_of(text, local=policy.local, forge=policy.forge)
    if kind == "shorthand":
        url = shorthand(text, policy.forge)
        assert url is not None  # kind_of said so
        if policy.local and os.path.lexists(text):  # never guessed: both are named
            raise InvalidRequest(
                f"{text} is ambiguous: the repository {url.removeprefix(GIT_PREFIX)} of the "
                f"configured forge, and ./{text} on this host; write ./{text} to install the "
                f"folder, or {url} for the repository"
            )
        return _git(url, work, policy)
    if kind == "git":
        return _git(text, work, policy)
    if kind == "url":
        return _url(text, work, policy)
    if kind != "path":
        raise NotFound(f"{text}: a pack id, not a git source, a URL or a path")
    if not policy.local:
        raise InvalidRequest(f"{text}: {_ON_SERVER}")
    path = Path(text).expanduser()
    if not path.exists():
        hint = ""
        if policy.forge is None and shorthand(text, "https://forge") is not None:
            hint = " (owner/repo of a git forge needs ONGRID_PACK_GIT_FORGE, or a git URL)"
        raise NotFound(f"{text}: no such folder or archive{hint}")
    return Candidate(path, str(path.resolve()), remote=False)


def from_index(entry: IndexVersion, work: Path, policy: SourcePolicy) -> Candidate:
    """The candidate of an index entry: fetched from its source, bound to its digest.

    An entry of a remote index is remote, whatever it says: its source must be an https://
    URL or a git remote (PackIndexError naming the entry otherwise, before anything is
    fetched), and the pack is judged as a remote one. A local index (the operator's file) may
    name sources of this host, even through a door that takes no local source itself."""
    if entry.remote:
        _check_remote_entry(entry)
    inner = SourcePolicy(policy.fetch, policy.git_timeout, local=not entry.remote)
    source = entry.source
    kind = kind_of(source, local=inner.local)
    if kind == "git":
        found = _git(source, work, inner)
    elif kind == "url":
        found = _url(source, work, inner)
    else:
        path = Path(source)
        if not path.exists():
            raise NotFound(f"{entry.label}: the index's source {source} does not exist")
        found = Candidate(path, str(path), remote=False)
    remote = found.remote or entry.remote
    return replace(found, remote=remote, digest=entry.digest, signer=entry.signer, via=entry.index)


def _check_remote_entry(entry: IndexVersion) -> None:
    """PackIndexError unless the source of a remote index's entry is remote and carries no
    credentials; decided from its text alone (nothing of this host is looked at)."""
    source = entry.source
    where = f"{entry.index}: {entry.label}"
    if looks_like_git(source):
        if is_local_git(source):
            raise PackIndexError(
                f"{where}: the source {source} is a repository on this host; a remote index "
                "may only name remote sources (https://, git over https:// or ssh)"
            )
        url = source.removeprefix(GIT_PREFIX)
    elif is_url(source):
        url = source
    else:
        shown = shown_url(source) if "://" in source else source
        raise PackIndexError(
            f"{where}: the source {shown} is not a remote source; a remote index may only "
            "name https:// URLs and git remotes (https://, ssh)"
        )
    if "://" in url:
        parts = urllib.parse.urlsplit(url)
        secret = parts.password is not None or (
            parts.username is not None and parts.scheme.lower() in ("http", "https")
        )
        if secret:
            raise PackIndexError(
                f"{where}: the source {shown_url(url)} carries credentials in its URL; an "
                "index is published: fetch private packs with a credential helper or a proxy"
            )


def _git(text: str, work: Path, policy: SourcePolicy) -> Candidate:
    if not policy.local and is_local_git(text):
        raise InvalidRequest(f"{text}: a repository on the server is installed with its CLI")
    source = parse_git(text, allow_http=policy.fetch.allow_http)
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
