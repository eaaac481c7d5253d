"""``pack.json``: what a pack says it is — id, version, description, homepage, requires.

Parsing is strict: the bytes go through the skill.json parser (one JSON object, UTF-8 without a
byte-order mark, at most 1 MiB, no key named twice, no NaN), then every field is checked and
every problem is reported at once, each with its line and column. ``version`` is a Semantic
Versioning 2.0.0 version (``1.4.0``, ``2.0.0-rc.1``), ordered by semver precedence;
``requires`` is a PEP 440 version specifier (``>=0.1,<2``) on the installed ongrid-skills.

Ids of folders that carry no ``pack.json`` (a Claude Code plugin, a bare skills folder) are
synthesised from a name: lowercased, every run of characters other than ``a-z`` and ``0-9``
replaced by one ``-``, dashes trimmed at both ends.

>>> synthesise_id("My Plugin_v2 (beta)")
'my-plugin-v2-beta'
>>> sorted(["1.10.0", "1.2.0", "1.2.0-rc.1"], key=version_key)
['1.2.0-rc.1', '1.2.0', '1.10.0']

This module reads one file and judges its fields; it must never look at the rest of the pack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import semver
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ongrid_skills.errors import ManifestError, PackError, PackProblem
from ongrid_skills.skills.skill_json import key_position, parse_manifest

MANIFEST = "pack.json"
ID_RE = re.compile(r"[a-z0-9_.-]+")
MAX_ID_LENGTH = 64
MAX_DESCRIPTION = 1024
MAX_HOMEPAGE = 2048
KNOWN_FIELDS = ("id", "version", "description", "homepage", "requires")
#: The version of a pack that names none (a synthesised pack).
UNVERSIONED = "0.0.0"


@dataclass(frozen=True, slots=True)
class PackManifest:
    """What a pack says it is. ``synthesised`` when no ``pack.json`` gave it."""

    id: str
    version: str
    description: str
    homepage: str | None = None
    requires: str | None = None
    synthesised: bool = False

    @property
    def label(self) -> str:
        """``id@version``, as messages and records name a pack."""
        return f"{self.id}@{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "description": self.description,
            "homepage": self.homepage,
            "requires": self.requires,
            "synthesised": self.synthesised,
        }


def synthesise_id(name: str) -> str:
    """The id of a pack named ``name`` (a folder, a plugin): lowercase, runs of other
    characters → ``-``; raises PackError when nothing is left."""
    pack_id = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_ID_LENGTH].strip("-")
    if not pack_id:
        raise PackError(f"cannot make a pack id from {name!r}: give the pack a pack.json")
    return pack_id


def is_version(text: str) -> bool:
    """True for a Semantic Versioning 2.0.0 version (``1.2.3``, ``1.2.3-rc.1+build.5``)."""
    return semver.Version.is_valid(text)


def version_key(text: str) -> semver.Version:
    """A sort key ordering versions by semver precedence (build metadata ignored)."""
    return semver.Version.parse(text)


def newest(versions: list[str]) -> str | None:
    """The highest of ``versions`` by semver precedence (invalid ones ignored), or None."""
    valid = [v for v in versions if is_version(v)]
    return max(valid, key=version_key) if valid else None


def running_version() -> str:
    """The version of the installed ongrid-skills distribution."""
    return metadata.version("ongrid-skills")


def requires_problem(requires: str | None, version: str | None = None) -> str | None:
    """Why this ongrid-skills (``version``, default: the running one) does not satisfy
    ``requires``; None when it does or when nothing is required."""
    if requires is None:
        return None
    current = version or running_version()
    try:
        wanted = SpecifierSet(requires)
        satisfied = Version(current) in wanted
    except (InvalidSpecifier, InvalidVersion) as exc:
        return f"requires {requires!r} cannot be checked: {exc}"
    if satisfied:
        return None
    return f"the pack requires ongrid-skills {requires}; this is {current}"


def parse_pack_json(raw: bytes, shown: str = MANIFEST) -> tuple[PackManifest, list[PackProblem]]:
    """Parse and check a ``pack.json``: (the manifest, its warnings). Every error is listed in
    one PackError, each with its line and column."""
    try:
        obj = parse_manifest(raw, shown)
    except ManifestError as err:
        problem = PackProblem(shown, err.message, err.line, err.column)
        raise PackError(f"{shown} is not a valid pack manifest", [problem]) from None
    text = raw.decode("utf-8")
    problems: list[PackProblem] = []

    def bad(key: str, message: str) -> None:
        line, column = key_position(text, key) if key in obj else (1, 1)
        problems.append(PackProblem(shown, message, line, column))

    pack_id = obj.get("id")
    if not isinstance(pack_id, str) or not pack_id:
        bad("id", "id is required (a string)")
    elif not ID_RE.fullmatch(pack_id) or len(pack_id) > MAX_ID_LENGTH:
        bad("id", f"id {pack_id!r} must match [a-z0-9_.-]+ (at most {MAX_ID_LENGTH} characters)")
    elif pack_id.strip(".") != pack_id or pack_id in (".", ".."):
        bad("id", f"id {pack_id!r} must not start or end with a dot")
    version = obj.get("version")
    if not isinstance(version, str) or not version:
        bad("version", "version is required (a string)")
    elif not is_version(version):
        bad("version", f"version {version!r} is not a semantic version such as 1.0.0")
    description = obj.get("description")
    if not isinstance(description, str) or not description.strip():
        bad("description", "description is required (a non-blank string)")
    elif len(description) > MAX_DESCRIPTION:
        bad("description", f"description is over {MAX_DESCRIPTION} characters")
    homepage = obj.get("homepage")
    if homepage is not None and not is_homepage(homepage):
        bad("homepage", "homepage must be an http:// or https:// URL")
    requires = obj.get("requires")
    if requires is not None:
        if not isinstance(requires, str) or not requires.strip():
            bad("requires", "requires must be a version specifier such as '>=0.1,<2'")
        else:
            try:
                SpecifierSet(requires)
            except InvalidSpecifier:
                bad("requires", f"requires {requires!r} is not a version specifier (>=0.1,<2)")
    for key in obj:
        if key not in KNOWN_FIELDS:
            line, column = key_position(text, key)
            message = f"unknown field {key!r} is ignored"
            problems.append(PackProblem(shown, message, line, column, "warning"))
    if any(p.severity == "error" for p in problems):
        raise PackError(f"{shown} is not a valid pack manifest", problems)
    manifest = PackManifest(
        id=str(pack_id),
        version=str(version),
        description=str(description).strip(),
        homepage=homepage,
        requires=requires.strip() if isinstance(requires, str) else None,
    )
    return manifest, problems


def is_homepage(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= MAX_HOMEPAGE
        and re.fullmatch(r"https?://[^\s\x00-\x1f\x7f]+", value) is not None
    )
