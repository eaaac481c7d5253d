"""Packs: a set of skills and personas that travels, is verified and is installed as one unit.

The modules, from the bytes up (docs/packs.md is the user's side of the same):

- :mod:`.manifest` — ``pack.json`` (id, semver version, description, homepage, requires),
  synthesised ids, version ordering;
- :mod:`.files` — the path rules every pack obeys in every form, the limits, the folder walk;
- :mod:`.digest` — the pack digest (SHA-256 over every file's path, mode and content);
- :mod:`.unpack` — safe, all-or-nothing unpacking of ``.tar.gz`` and ``.zip``;
- :mod:`.layout` — pack, Claude Code plugin or bare skills folder; the pack's root;
- :mod:`.contents` — the skills and personas, through the loader and the lint of ``skills``;
- :mod:`.keys` — OpenSSH / PEM Ed25519 keys, trusted keys, ``SHA256:`` fingerprints;
- :mod:`.signature` — the signature file and the Ed25519 signature of a digest;
- :mod:`.source` — :func:`stage`: a folder or an archive → a checked copy in a staging folder;
- :mod:`.trust` — :func:`judge`, :func:`verify_path`, :func:`sign_path`;
- :mod:`.build` — :func:`build_archive`: a reproducible ``<id>-<version>.tar.gz``;
- :mod:`.fetch`, :mod:`.git`, :mod:`.sources` — where a pack comes from: bounded downloads,
  shallow clones that run nothing, a SOURCE → a candidate on this host;
- :mod:`.index` — marketplace ``index.json`` files: reading, merging, resolving, building;
- :mod:`.home`, :mod:`.records`, :mod:`.install` — the installed packs of a data dir: the
  folders and links, the record (a port the store implements), the all-or-nothing transaction;
- :mod:`.service` — :class:`~.service.Packs`: the pack commands of every door.

The flow of an install (:mod:`.install`): ``stage(source, into)`` → ``judge(...)`` (the trust
policy on ``unsigned``/``untrusted``) → ``inspect_pack(staged.detected)`` →
``contents.raise_for_errors`` → the name check → record, place, switch the active link, commit.

It sits beside ``skills`` (whose loader and lint it uses): it must never import a door, the
manager, the runtime, the store or execution, and never registers or runs a skill itself (a
registry finds installed packs through their links: :mod:`ongrid_skills.skills.packroots`).
"""

from ongrid_skills.packs.build import BuiltPack, build_archive
from ongrid_skills.packs.contents import PackContents, inspect_pack
from ongrid_skills.packs.digest import digest_folder, is_digest
from ongrid_skills.packs.files import Limits, PackFile
from ongrid_skills.packs.keys import (
    SigningKey,
    TrustedKey,
    TrustedKeys,
    fingerprint,
    load_signing_key,
    load_trusted_keys,
    parse_trusted_keys,
)
from ongrid_skills.packs.layout import Detected, Layout, detect
from ongrid_skills.packs.manifest import (
    PackManifest,
    is_version,
    newest,
    requires_problem,
    synthesise_id,
    version_key,
)
from ongrid_skills.packs.signature import PackSignature, parse_signature, sign
from ongrid_skills.packs.source import StagedPack, stage, staged
from ongrid_skills.packs.trust import Trust, Verification, judge, sign_path, verify_path
from ongrid_skills.packs.unpack import unpack_archive

__all__ = [
    "BuiltPack",
    "Detected",
    "Layout",
    "Limits",
    "PackContents",
    "PackFile",
    "PackManifest",
    "PackSignature",
    "SigningKey",
    "StagedPack",
    "Trust",
    "TrustedKey",
    "TrustedKeys",
    "Verification",
    "build_archive",
    "detect",
    "digest_folder",
    "fingerprint",
    "inspect_pack",
    "is_digest",
    "is_version",
    "judge",
    "load_signing_key",
    "load_trusted_keys",
    "newest",
    "parse_signature",
    "parse_trusted_keys",
    "requires_problem",
    "sign",
    "sign_path",
    "stage",
    "staged",
    "synthesise_id",
    "unpack_archive",
    "verify_path",
    "version_key",
]
