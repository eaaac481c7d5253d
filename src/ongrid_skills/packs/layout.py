"""Which kind of pack a folder is, where its root is, and the manifest it has or is given.

Three layouts are packs, tried in this order at the pack's root:

1. ``pack.json`` — a pack of ours: its manifest is read strictly (:mod:`.manifest`);
2. ``.claude-plugin/plugin.json`` — a Claude Code plugin: id synthesised from the plugin's
   ``name``, its ``version`` when that is a semantic version (else ``0.0.0``), its
   ``description`` and ``homepage`` (or ``repository``) when they are strings;
3. ``SKILL.md`` at the root or ``skills/*/SKILL.md`` — a bare skills folder: id synthesised
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
SKILLS_DIR = "skills"
AGENTS_DIR = "agents"


class Layout(StrEnum):
    """The kind of folder a pack came as."""

    PACK = "pack"
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
    raw = _read(root / PLUGIN_MANIFEST, PLUGIN_MANIFEST)
    try:
        obj = parse_manifest(raw, PLUGIN_MANIFEST)
    except ManifestError as err:
        problem = PackProblem(PLUGIN_MANIFEST, err.message, err.line, err.column)
        raise PackError(f"{PLUGIN_MANIFEST} cannot be read", [problem]) from None
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        problem = PackProblem(PLUGIN_MANIFEST, "name is required (a string)")
        raise PackError(f"{PLUGIN_MANIFEST} names no plugin", [problem])
    warnings: list[PackProblem] = []
    version = obj.get("version")
    if not isinstance(version, str) or not is_version(version):
        if version is not None:
            message = f"version {version!r} is not a semantic version: the pack is {UNVERSIONED}"
            warnings.append(PackProblem(PLUGIN_MANIFEST, message, severity="warning"))
        version = UNVERSIONED
    description = obj.get("description")
    if not isinstance(description, str) or not description.strip():
        description = f"Claude Code plugin {name}"
    homepage = next(
        (value for value in (obj.get("homepage"), obj.get("repository")) if is_homepage(value)),
        None,
    )
    manifest = PackManifest(
        synthesise_id(name), version, description.strip(), homepage, synthesised=True
    )
    return Detected(root, Layout.PLUGIN, manifest, tuple(warnings))


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
