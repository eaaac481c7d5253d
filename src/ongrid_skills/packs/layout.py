"""Which kind of pack a folder is, where its root is, and the manifest it has or is given.

Four layouts are packs, tried in this order at the pack's root:

1. ``pack.json`` — a pack of ours: its manifest is read strictly (:mod:`.manifest`);
2. ``openclaw.plugin.json`` — an openclaw plugin: id from its ``id``, its ``version`` when that
   is a semantic version (else ``0.0.0``), its ``description``; only the skills under the
   folders its ``skills`` lists load (:mod:`ongrid_skills.skills.plugins`), and its other
   fields (``kind``, ``channels``, ``configSchema``…) are kept and shown
   (:func:`declared_fields`);
3. ``.claude-plugin/plugin.json`` — a Claude Code plugin: id synthesised from the plugin's
   ``name``, its ``version`` when that is a semantic version (else ``0.0.0``), its
   ``description`` and ``homepage`` (or ``repository``) when they are strings;
4. ``SKILL.md`` at the root or ``skills/*/SKILL.md`` — a bare skills folder: id synthesised
   from the folder's name, version ``0.0.0``.

An archive often holds one top folder (``tar czf x.tar.gz x/``, a git host's archive): when the
unpacked folder matches no layout and holds exactly one folder and nothing else, that folder is
the pack's root (:func:`find_root`), and its name is the one a synthesised id is made from.

This module reads the manifests; it must never load a skill (that is :mod:`.inspect`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ongrid_skills.errors import ManifestError, PackError, PackProblem
from ongrid_skills.packs.manifest import (
    MANIFEST,
    UNVERSIONED,
    PackManifest,
    is_homepage,
    is_version,
    parse_pack_json,
    synthesise_id,
)
from ongrid_skills.paths import NotRegularFile, read_regular
from ongrid_skills.skills.bundle import is_skill_file
from ongrid_skills.skills.skill_json import MAX_MANIFEST_BYTES, parse_manifest

PLUGIN_MANIFEST = ".claude-plugin/plugin.json"
OPENCLAW_MANIFEST = "openclaw.plugin.json"
#: The fields of a plugin manifest a pack is made from; every other one is kept and shown.
_USED = {"id", "name", "version", "description", "homepage", "repository", "skills"}
SKILLS_DIR = "skills"
AGENTS_DIR = "agents"


class Layout(StrEnum):
    """The kind of folder a pack came as."""

    PACK = "pack"
    OPENCLAW = "openclaw-plugin"
    PLUGIN = "claude-plugin"
    SKILLS = "skills-folder"


@dataclass(frozen=True, slots=True)
class Detected:
    """A pack's root, its layout, its manifest (read or synthesised) and the manifest's
    warnings (unknown fields, a plugin version that is not semver…)."""

    root: Path
    layout: Layout
    manifest: PackManifest
    warnings: tuple[PackProblem, ...] = ()


def layout_of(root: Path) -> Layout | None:
    """The layout of the folder ``root``, or None when it is no pack."""
    if (root / MANIFEST).is_file():
        return Layout.PACK
    if (root / OPENCLAW_MANIFEST).is_file():
        return Layout.OPENCLAW
    if (root / PLUGIN_MANIFEST).is_file():
        return Layout.PLUGIN
    if _has_skill_file(root):
        return Layout.SKILLS
    skills = root / SKILLS_DIR
    if skills.is_dir() and not skills.is_symlink():
        for child in sorted(skills.iterdir()):
            if child.is_dir() and not child.is_symlink() and _has_skill_file(child):
                return Layout.SKILLS
    return None


def find_root(folder: Path) -> Path:
    """The pack's root inside an unpacked folder: the folder itself, or its only subfolder
    when the folder matches no layout and holds nothing else."""
    if layout_of(folder) is not None:
        return folder
    try:
        entries = list(folder.iterdir())
    except OSError:
        return folder
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return folder


def detect(root: Path, name: str | None = None) -> Detected:
    """The layout and manifest of the pack at ``root``; ``name`` (default: the root's folder
    name) is what a bare skills folder's id is made from. PackError when it is no pack."""
    layout = layout_of(root)
    if layout is Layout.PACK:
        manifest, warnings = parse_pack_json(_read(root / MANIFEST, MANIFEST), MANIFEST)
        return Detected(root, layout, manifest, tuple(warnings))
    if layout is Layout.OPENCLAW:
        return _openclaw(root)
    if layout is Layout.PLUGIN:
        return _plugin(root)
    if layout is Layout.SKILLS:
        pack_id = synthesise_id(name or root.name)
        description = f"Skills of the folder {name or root.name}"
        manifest = PackManifest(pack_id, UNVERSIONED, description, synthesised=True)
        return Detected(root, layout, manifest)
    raise PackError(
        f"{root} is not a pack: no {MANIFEST}, no {PLUGIN_MANIFEST}, no SKILL.md at its root "
        f"or under {SKILLS_DIR}/*/"
    )


def _plugin(root: Path) -> Detected:
    obj = _manifest_object(root, PLUGIN_MANIFEST)
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        problem = PackProblem(PLUGIN_MANIFEST, "name is required (a string)")
        raise PackError(f"{PLUGIN_MANIFEST} names no plugin", [problem])
    warnings: list[PackProblem] = []
    version = _version(obj.get("version"), PLUGIN_MANIFEST, warnings)
    description = obj.get("description")
    if not isinstance(description, str) or not description.strip():
        description = f"Claude Code plugin {name}"
    homepage = _homepage(obj)
    manifest = PackManifest(
        synthesise_id(name), version, description.strip(), homepage, synthesised=True
    )
    return Detected(root, Layout.PLUGIN, manifest, tuple(warnings))


def _openclaw(root: Path) -> Detected:
    """An openclaw plugin: ``id`` (required; made a pack id when it is not one), ``version``
    (semver, else 0.0.0), ``description`` (else its ``name``), and ``skills``: the folders,
    relative to the root, its skills load from (each must exist inside the pack)."""
    obj = _manifest_object(root, OPENCLAW_MANIFEST)
    raw_id = obj.get("id")
    if not isinstance(raw_id, str) or not raw_id.strip():
        problem = PackProblem(OPENCLAW_MANIFEST, "id is required (a string)")
        raise PackError(f"{OPENCLAW_MANIFEST} names no plugin", [problem])
    warnings: list[PackProblem] = []
    pack_id = synthesise_id(raw_id)
    if pack_id != raw_id:
        message = f"id {raw_id!r} is not a pack id: the pack is {pack_id}"
        warnings.append(PackProblem(OPENCLAW_MANIFEST, message, severity="warning"))
    version = _version(obj.get("version"), OPENCLAW_MANIFEST, warnings)
    problems = [
        PackProblem(OPENCLAW_MANIFEST, why) for why in _skill_dirs_problems(root, obj.get("skills"))
    ]
    if problems:
        raise PackError(f"{OPENCLAW_MANIFEST} lists skills it does not hold", problems)
    name = obj.get("name") if isinstance(obj.get("name"), str) else raw_id
    description = obj.get("description")
    if not isinstance(description, str) or not description.strip():
        description = f"openclaw plugin {name}"
    homepage = _homepage(obj)
    manifest = PackManifest(pack_id, version, description.strip(), homepage, synthesised=True)
    return Detected(root, Layout.OPENCLAW, manifest, tuple(warnings))


def _skill_dirs_problems(root: Path, listed: object) -> list[str]:
    if listed is None:
        return []
    if not isinstance(listed, list) or not all(isinstance(e, str) for e in listed):
        return ["skills must be a list of folders relative to the plugin's root"]
    out = []
    real_root = os.path.realpath(root)
    for entry in listed:
        target = os.path.realpath(os.path.join(real_root, entry))
        if os.path.isabs(entry) or not (target + os.sep).startswith(real_root + os.sep):
            out.append(f"skills entry {entry!r} leaves the plugin's root")
        elif not os.path.isdir(target):
            out.append(f"skills entry {entry!r} is not a folder of the plugin")
    return out


def _homepage(obj: dict[str, object]) -> str | None:
    for value in (obj.get("homepage"), obj.get("repository")):
        if isinstance(value, str) and is_homepage(value):
            return value
    return None


def _version(version: object, shown: str, warnings: list[PackProblem]) -> str:
    if isinstance(version, str) and is_version(version):
        return version
    if version is not None:
        message = f"version {version!r} is not a semantic version: the pack is {UNVERSIONED}"
        warnings.append(PackProblem(shown, message, severity="warning"))
    return UNVERSIONED


def _manifest_object(root: Path, shown: str) -> dict[str, object]:
    raw = _read(root / shown, shown)
    try:
        return parse_manifest(raw, shown)
    except ManifestError as err:
        problem = PackProblem(shown, err.message, err.line, err.column)
        raise PackError(f"{shown} cannot be read", [problem]) from None


def declared_fields(root: Path) -> dict[str, object] | None:
    """The fields of a plugin manifest at ``root`` (openclaw's, else Claude Code's) that the
    pack is not made from — ``kind``, ``channels``, ``providers``, ``configSchema``,
    ``uiHints``, ``author``…: kept in the pack's files, shown with it. None without one."""
    for shown in (OPENCLAW_MANIFEST, PLUGIN_MANIFEST):
        if (root / shown).is_file():
            try:
                obj = _manifest_object(root, shown)
            except PackError:
                return None
            return {key: value for key, value in obj.items() if key not in _USED}
    return None


def _read(path: Path, shown: str) -> bytes:
    try:
        if path.is_symlink():
            raise NotRegularFile("a symbolic link")
        return read_regular(str(path), MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        problem = PackProblem(shown, f"cannot read: {exc.strerror or exc}")
        raise PackError(f"{shown} cannot be read", [problem]) from None


def _has_skill_file(folder: Path) -> bool:
    try:
        return any(is_skill_file(name) for name in os.listdir(folder))
    except OSError:
        return False
