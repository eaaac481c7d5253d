"""``pack build``: a validated pack folder → a reproducible ``<id>-<version>.tar.gz``.

The folder is staged (the rules of :mod:`.files`: no link, no special file, the limits) and
inspected (:mod:`.contents`: the loader and the lint); a pack with any error is refused with
every problem listed. The archive is then written from the staged copy so that the same files
always give the same bytes:

- one top folder ``<id>-<version>/`` holding the pack's files, ``pack.sig`` included when the
  folder has one (``.git`` never);
- entries sorted by path (a folder before what it holds), folders included;
- every mtime 0, owner and group 0 with empty names, modes ``755`` (folders and executables)
  or ``644``; PAX format;
- gzip with no file name and mtime 0 in its header, compression level 9.

The archive is written to a temporary file beside the output and renamed over it. This module
must never write anything but that one archive.
"""

from __future__ import annotations

import gzip
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ongrid_skills.errors import PackError
from ongrid_skills.packs.contents import PackContents, inspect_pack
from ongrid_skills.packs.files import EXECUTABLE, Limits, PackFile, replacing, walk_folder
from ongrid_skills.packs.manifest import PackManifest
from ongrid_skills.packs.source import staged

MTIME = 0
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class BuiltPack:
    """An archive written by :func:`build_archive`: where, what it holds, its digest."""

    path: Path
    manifest: PackManifest
    digest: str
    contents: PackContents


def archive_name(manifest: PackManifest) -> str:
    """``<id>-<version>.tar.gz``."""
    return f"{manifest.id}-{manifest.version}.tar.gz"


def build_archive(
    folder: Path,
    output: Path | None = None,
    limits: Limits | None = None,
    *,
    ongrid_version: str | None = None,
) -> BuiltPack:
    """Validate the pack folder ``folder`` and write its reproducible archive to ``output``
    (default ``./<id>-<version>.tar.gz``; a folder: that name inside it). PackError (with every
    problem) when the pack is not valid."""
    if not folder.is_dir():
        raise PackError(f"{folder}: not a folder (pack build takes a pack folder)")
    with staged(folder, limits) as pack:
        contents = inspect_pack(pack.detected, ongrid_version=ongrid_version)
        contents.raise_for_errors(pack.manifest.label)
        name = archive_name(pack.manifest)
        target = output if output is not None else Path.cwd() / name
        if target.is_dir():
            target = target / name
        top = f"{pack.manifest.id}-{pack.manifest.version}"
        write_tar_gz(pack.root, target, top, limits or Limits())
        return BuiltPack(target, pack.manifest, pack.digest, contents)


def write_tar_gz(root: Path, target: Path, top: str, limits: Limits) -> None:
    """The reproducible archive of the folder ``root`` under the top folder ``top``."""
    files = walk_folder(root, limits, signature=True)
    folders = {
        "/".join(f.path.split("/")[:i]) for f in files for i in range(1, f.path.count("/") + 1)
    }
    listed: list[tuple[str, PackFile | None]] = [(path, None) for path in folders]
    entries = sorted(
        listed + [(f.path, f) for f in files],
        key=lambda entry: entry[0].encode("utf-8").split(b"/"),
    )
    with (
        replacing(target) as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=MTIME, compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        tar.addfile(_info(top, None))
        for path, file in entries:
            info = _info(f"{top}/{path}", file)
            if file is None:
                tar.addfile(info)
                continue
            with open(root / path, "rb") as data:
                tar.addfile(info, data)


def _info(name: str, file: PackFile | None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if file is None:
        info.type = tarfile.DIRTYPE
        info.mode = EXECUTABLE
    else:
        info.type = tarfile.REGTYPE
        info.mode = file.mode
        info.size = file.size
    return info
