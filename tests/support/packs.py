"""Real packs on disk: pack folders, archives built with tarfile and zipfile entry by entry (so
tests can write what no honest tool would), and Ed25519 keys made by ``ssh-keygen`` when the
machine has it, else by ``cryptography`` in the same OpenSSH format.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.index import build_index
from ongrid_skills.packs.keys import load_signing_key
from ongrid_skills.packs.trust import sign_path
from tests.support.skills import EXAMPLE_SKILLS, write_persona, write_skill, write_skill_md

SSH_KEYGEN = shutil.which("ssh-keygen")
#: The repository's example pack, its index and its (public, test-only) signing key.
EXAMPLE_PACKS = EXAMPLE_SKILLS.parent / "packs"


def write_pack(
    root: Path,
    pack_id: str = "demo",
    version: str = "1.0.0",
    *,
    skills: Iterable[str] = ("alpha",),
    native: Iterable[str] = (),
    personas: Iterable[str] = (),
    **manifest: Any,
) -> Path:
    """A pack folder: pack.json, skill.json skills under skills/, SKILL.md skills under
    skills/, personas under agents/."""
    root.mkdir(parents=True, exist_ok=True)
    body = {"id": pack_id, "version": version, "description": f"The {pack_id} pack", **manifest}
    (root / "pack.json").write_text(json.dumps(body, indent=2) + "\n")
    for name in skills:
        write_skill(root / "skills", name)
    for name in native:
        write_skill_md(
            root / "skills",
            name.replace("_", "-"),
            {"name": name, "description": f"How to {name}."},
        )
    for name in personas:
        write_persona(root / "agents", name)
    return root


@dataclass(frozen=True)
class Entry:
    """One archive entry as a test wants it, honest or not."""

    name: str
    data: bytes = b""
    mode: int = 0o644
    kind: str = "file"  # file | dir | symlink | hardlink | fifo | chr | blk | sparse
    target: str = ""  # for links


def tar_gz(path: Path, entries: Iterable[Entry], *, mode: str = "w:gz") -> Path:
    """A .tar.gz with exactly ``entries``, in order (``mode="w"``: a plain .tar)."""
    kinds = {
        "file": tarfile.REGTYPE,
        "dir": tarfile.DIRTYPE,
        "symlink": tarfile.SYMTYPE,
        "hardlink": tarfile.LNKTYPE,
        "fifo": tarfile.FIFOTYPE,
        "chr": tarfile.CHRTYPE,
        "blk": tarfile.BLKTYPE,
        "sparse": tarfile.GNUTYPE_SPARSE,
    }
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type = kinds[entry.kind]
            info.mode = entry.mode
            info.linkname = entry.target
            if entry.kind == "file":
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            else:
                tar.addfile(info)
    return path


def zip_file(path: Path, entries: Iterable[Entry]) -> Path:
    """A .zip with exactly ``entries`` (Unix modes in the external attributes)."""
    types = {"file": 0o100000, "dir": 0o040000, "symlink": 0o120000, "fifo": 0o010000}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for entry in entries:
            info = zipfile.ZipInfo(entry.name)
            info.create_system = 3
            info.external_attr = (types[entry.kind] | entry.mode) << 16
            data = entry.target.encode() if entry.kind == "symlink" else entry.data
            zf.writestr(info, data)
    return path


def pack_entries(prefix: str = "") -> list[Entry]:
    """The entries of a small valid pack (one skill.json skill)."""
    return [
        Entry(f"{prefix}pack.json", b'{"id": "demo", "version": "1.0.0", "description": "d"}'),
        Entry(
            f"{prefix}skills/alpha/skill.json",
            b'{"name": "alpha", "description": "a", "entry": "run"}',
        ),
        Entry(f"{prefix}skills/alpha/run", b"#!/bin/sh\necho '{}'\n", 0o755),
    ]


@dataclass(frozen=True)
class KeyPair:
    """A private key file and its public ``.pub`` file (authorized_keys line)."""

    private: Path
    public: Path

    @property
    def public_line(self) -> str:
        return self.public.read_text().strip()


def make_key(folder: Path, name: str = "id_ed25519", passphrase: str = "") -> KeyPair:
    """An Ed25519 key pair in OpenSSH format: ``ssh-keygen`` when present, else cryptography."""
    folder.mkdir(parents=True, exist_ok=True)
    private = folder / name
    if SSH_KEYGEN is not None:
        comment = f"{name}@test"
        command = [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", passphrase, "-C", comment]
        subprocess.run([*command, "-f", str(private)], check=True)
    else:
        key = Ed25519PrivateKey.generate()
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(passphrase.encode())
            if passphrase
            else serialization.NoEncryption()
        )
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, encryption
            )
        )
        line = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        (folder / f"{name}.pub").write_text(f"{line.decode()} {name}@test\n")
    private.chmod(0o600)
    return KeyPair(private, folder / f"{name}.pub")


def tree(root: Path) -> list[str]:
    """Every path under ``root`` (relative, sorted), to compare what exists before and after."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@dataclass(frozen=True)
class Market:
    """A marketplace on disk: signed archives, their ``index.json``, the key that signed
    them, and a trusted-keys file naming that key and the example pack's test key."""

    folder: Path
    index: Path
    key: KeyPair
    trusted: Path


def signed_market(base: Path, releases: dict[str, dict[str, tuple[str, ...]]]) -> Market:
    """Build ``{pack id: {version: skill names}}`` as signed archives under ``base/market``
    and write their index (``pack index build``)."""
    key = make_key(base / "keys", "market")
    signing = load_signing_key(key.private)
    folder = base / "market"
    folder.mkdir(parents=True)
    for pack_id, versions in releases.items():
        for version, skills in versions.items():
            source = write_pack(
                base / "sources" / pack_id / version, pack_id, version, skills=skills
            )
            sign_path(build_archive(source, folder).path, signing)
    index = build_index(folder, Limits())
    trusted = base / "trusted.keys"
    trusted.write_text(
        key.public.read_text() + (EXAMPLE_PACKS / "TEST-KEY-DO-NOT-USE.pub").read_text()
    )
    return Market(folder, index, key, trusted)
