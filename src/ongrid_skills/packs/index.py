"""Marketplace indexes: ``index.json`` files that list packs, their versions, digests, signers.

An index is static JSON, so a team hosts its marketplace as files (``pack index build``)::

    {
      "format": "ongrid-pack-index v1",
      "packs": [
        {
          "id": "ops-basics",
          "description": "Read-only probes for on-call",
          "homepage": "https://example.com/ops-basics",
          "versions": [
            {"version": "1.0.0", "source": "ops-basics-1.0.0.tar.gz",
             "digest": "sha256:…", "signer": "SHA256:…"}
          ]
        }
      ]
    }

``source`` is a URL, a git source, or a path; a relative one is resolved against the index's own
location (the folder of a local index, the URL of a remote one). A remote index never names a
source of this host: its paths resolve to URLs of its server, and an entry naming a repository
or a file of this host (``git+/path``, ``file://``) is refused when installed
(:func:`.sources.from_index`). ``digest`` is what the fetched pack must have; ``signer``, when
given, the key its signature must be by. Indexes are read strictly (one JSON object, no key
twice, at most 16 MiB, every field checked) and merged in the order configured: for one
``id@version`` the first index that lists it wins. Only :func:`build_index` writes, and only
the one file it is asked to.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ongrid_skills import strict_json
from ongrid_skills.errors import NotFound, PackIndexError, PackProblem, SkillError
from ongrid_skills.packs.digest import is_digest
from ongrid_skills.packs.fetch import FetchPolicy, fetch_bytes, is_url, shown_url
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.git import is_scp_like
from ongrid_skills.packs.keys import TrustedKeys, is_fingerprint
from ongrid_skills.packs.manifest import (
    ID_RE,
    MAX_DESCRIPTION,
    is_homepage,
    is_version,
    version_key,
)
from ongrid_skills.packs.source import ARCHIVE_SUFFIXES, staged
from ongrid_skills.packs.trust import judge, write_atomic
from ongrid_skills.paths import read_regular

FORMAT = "ongrid-pack-index v1"
INDEX_FILE = "index.json"
MAX_INDEX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class IndexVersion:
    """One version an index offers: where to fetch it (resolved), and what it must be."""

    pack_id: str
    version: str
    source: str
    digest: str
    signer: str | None
    index: str
    remote: bool = True  # listed by an index read from a URL: its source must be remote too

    @property
    def label(self) -> str:
        return f"{self.pack_id}@{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": shown_url(self.source) if is_url(self.source) else self.source,
            "digest": self.digest,
            "signer": self.signer,
            "index": self.index,
        }


@dataclass(frozen=True, slots=True)
class IndexPack:
    """A pack as the indexes offer it: its versions, newest first."""

    pack_id: str
    description: str
    homepage: str | None
    versions: tuple[IndexVersion, ...]

    def newest(self) -> IndexVersion:
        """The highest release by semver; a pre-release only when there is no release."""
        releases = [v for v in self.versions if "-" not in v.version.split("+", 1)[0]]
        return max(releases or self.versions, key=lambda v: version_key(v.version))

    def get(self, version: str) -> IndexVersion | None:
        return next((v for v in self.versions if v.version == version), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.pack_id,
            "description": self.description,
            "homepage": self.homepage,
            "newest": self.newest().version,
            "versions": [v.to_dict() for v in self.versions],
        }


@dataclass(slots=True)
class Catalog:
    """The packs of every configured index, merged; ``problems`` names the indexes that could
    not be read (the others are still used)."""

    packs: dict[str, IndexPack] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def search(self, text: str) -> list[IndexPack]:
        """Packs whose id or description holds ``text`` (any letter case), by id."""
        needle = text.strip().lower()
        return [
            pack
            for pack_id, pack in sorted(self.packs.items())
            if not needle or needle in pack_id or needle in pack.description.lower()
        ]

    def resolve(self, pack_id: str, version: str | None = None) -> IndexVersion:
        """``id`` (its newest version) or ``id@version``; NotFound naming what is offered."""
        pack = self.packs.get(pack_id)
        unread = f" ({'; '.join(self.problems)})" if self.problems else ""
        if pack is None:
            raise NotFound(f"no pack {pack_id!r} in the indexes{unread}")
        if version is None:
            return pack.newest()
        found = pack.get(version)
        if found is None:
            offered = ", ".join(v.version for v in pack.versions)
            raise NotFound(f"no version {version} of {pack_id} in the indexes (offered: {offered})")
        return found


def read_index(location: str, policy: FetchPolicy) -> list[IndexPack]:
    """The packs of the index at ``location`` (a path or an https:// URL); PackIndexError."""
    shown = shown_url(location) if is_url(location) else location
    try:
        if is_url(location):
            small = FetchPolicy(MAX_INDEX_BYTES, policy.timeout, policy.allow_http)
            raw = fetch_bytes(location, small)
        else:
            raw = read_regular(location, MAX_INDEX_BYTES + 1)
            if len(raw) > MAX_INDEX_BYTES:
                raise PackIndexError(f"{shown}: over {MAX_INDEX_BYTES} bytes")
    except OSError as exc:
        raise PackIndexError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    except SkillError as exc:
        raise PackIndexError(f"index {exc.message}") from None
    base = location if is_url(location) else os.path.dirname(os.path.abspath(location))
    return parse_index(raw, shown, base)


def load_catalog(locations: Iterable[str], policy: FetchPolicy) -> Catalog:
    """Every index of ``locations`` merged (the first index listing an id@version wins)."""
    catalog = Catalog()
    for location in locations:
        try:
            packs = read_index(location, policy)
        except PackIndexError as exc:
            catalog.problems.append(exc.message)
            continue
        for pack in packs:
            known = catalog.packs.get(pack.pack_id)
            if known is None:
                catalog.packs[pack.pack_id] = pack
                continue
            have = {v.version for v in known.versions}
            extra = tuple(v for v in pack.versions if v.version not in have)
            merged = sorted(known.versions + extra, key=lambda v: version_key(v.version))
            catalog.packs[pack.pack_id] = IndexPack(
                known.pack_id, known.description, known.homepage, tuple(reversed(merged))
            )
    return catalog


def parse_index(raw: bytes, shown: str, base: str) -> list[IndexPack]:
    """The packs of an index's bytes; every problem listed in one PackIndexError."""
    try:
        obj: Any = strict_json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PackIndexError(f"{shown}: not a JSON index: {exc}") from None
    problems: list[PackProblem] = []

    def bad(pointer: str, message: str) -> None:
        problems.append(PackProblem(shown, f"{pointer}: {message}"))

    if not isinstance(obj, dict) or not isinstance(obj.get("packs"), list):
        raise PackIndexError(f"{shown}: expected an object with a list of packs")
    if obj.get("format", FORMAT) != FORMAT:
        bad("/format", f"{obj.get('format')!r} is not {FORMAT!r}")
    out: list[IndexPack] = []
    seen: set[str] = set()
    for number, item in enumerate(obj["packs"]):
        where = f"/packs/{number}"
        pack = _pack(item, where, shown, base, bad)
        if pack is None:
            continue
        if pack.pack_id in seen:
            bad(f"{where}/id", f"{pack.pack_id!r} is listed twice")
            continue
        seen.add(pack.pack_id)
        out.append(pack)
    if problems:
        raise PackIndexError(f"{shown} is not a valid index", problems)
    return out


def _pack(item: Any, where: str, shown: str, base: str, bad: Any) -> IndexPack | None:
    if not isinstance(item, dict):
        bad(where, "expected an object")
        return None
    pack_id = item.get("id")
    if not isinstance(pack_id, str) or not ID_RE.fullmatch(pack_id) or len(pack_id) > 64:
        bad(f"{where}/id", "an id [a-z0-9_.-]+ is required")
        return None
    description = item.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        bad(f"{where}/description", f"a string of at most {MAX_DESCRIPTION} characters")
        description = ""
    homepage = item.get("homepage")
    if homepage is not None and not is_homepage(homepage):
        bad(f"{where}/homepage", "an http:// or https:// URL")
    versions: list[IndexVersion] = []
    raw_versions = item.get("versions")
    if not isinstance(raw_versions, list) or not raw_versions:
        bad(f"{where}/versions", "a non-empty list is required")
        return None
    for n, entry in enumerate(raw_versions):
        at = f"{where}/versions/{n}"
        if not isinstance(entry, dict):
            bad(at, "expected an object")
            continue
        version, source = entry.get("version"), entry.get("source")
        digest, signer = entry.get("digest"), entry.get("signer")
        if not isinstance(version, str) or not is_version(version):
            bad(f"{at}/version", "a semantic version is required")
            continue
        if any(v.version == version for v in versions):
            bad(f"{at}/version", f"{version} is listed twice")
            continue
        if not isinstance(source, str) or not source.strip():
            bad(f"{at}/source", "a URL or a path is required")
            continue
        if not is_digest(digest):
            bad(f"{at}/digest", "sha256: and 64 lowercase hex digits are required")
            continue
        if signer is not None and not is_fingerprint(signer):
            bad(f"{at}/signer", "a SHA256: key fingerprint")
            continue
        resolved = resolve_source(base, source.strip())
        versions.append(
            IndexVersion(pack_id, version, resolved, str(digest), signer, shown, is_url(base))
        )
    versions.sort(key=lambda v: version_key(v.version), reverse=True)
    shown_home = homepage if is_homepage(homepage) else None
    return IndexPack(pack_id, description.strip(), shown_home, tuple(versions))


def resolve_source(base: str, source: str) -> str:
    """``source`` as fetched: relative ones against the index's URL or folder."""
    if is_url(source) or source.startswith("git+") or "://" in source or is_scp_like(source):
        return source
    if is_url(base):
        return urllib.parse.urljoin(base, source)
    return source if os.path.isabs(source) else os.path.join(base, source)


def build_index(folder: Path, limits: Limits, *, base_url: str | None = None) -> Path:
    """Write ``folder/index.json`` for the pack archives in ``folder`` (digests, signers);
    sources are the archives' names (or ``base_url`` + name). Returns the file written."""
    packs: dict[str, dict[str, Any]] = {}
    archives = sorted(
        p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(ARCHIVE_SUFFIXES)
    )
    if not archives:
        raise NotFound(f"{folder}: no pack archive (.tar.gz, .tgz, .tar, .zip) to index")
    for archive in archives:
        with staged(archive, limits) as pack:
            verdict = judge(pack.digest, pack.signature, TrustedKeys())  # BadSignature if bad
            manifest = pack.manifest
        entry = packs.setdefault(manifest.id, {"id": manifest.id, "versions": []})
        if any(v["version"] == manifest.version for v in entry["versions"]):
            raise PackIndexError(f"{archive.name}: a second archive of {manifest.label}")
        source = (base_url.rstrip("/") + "/" if base_url else "") + archive.name
        entry["versions"].append(
            {
                "version": manifest.version,
                "source": source,
                "digest": pack.digest,
                "signer": verdict.signer,
                "_manifest": manifest,
            }
        )
    listed = []
    for pack_id in sorted(packs):
        versions = sorted(
            packs[pack_id]["versions"], key=lambda v: version_key(v["version"]), reverse=True
        )
        newest = versions[0].pop("_manifest")
        for other in versions[1:]:
            other.pop("_manifest")
        body: dict[str, Any] = {"id": pack_id, "description": newest.description}
        if newest.homepage:
            body["homepage"] = newest.homepage
        body["versions"] = [{k: v for k, v in ver.items() if v is not None} for ver in versions]
        listed.append(body)
    target = folder / INDEX_FILE
    write_atomic(target, json.dumps({"format": FORMAT, "packs": listed}, indent=2) + "\n")
    return target
