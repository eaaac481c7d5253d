"""Signing a pack, and judging one: is it signed, does the signature hold, is its signer trusted.

:func:`judge` answers for a staged pack's digest and signature:

- no signature → ``unsigned``;
- a signature that does not verify, or was made for another digest → BadSignature (raised:
  such a pack is refused whatever the caller's policy);
- a valid signature by a key of the operator's → ``trusted``; by another key → ``untrusted``.

What a caller does with ``unsigned`` and ``untrusted`` is its policy (SPEC §11: remote sources
must be trusted unless ``--allow-unsigned``; local ones may be unsigned, with a warning).

:func:`sign_path` signs a folder (writes its ``pack.sig``) or an archive (writes
``<archive>.sig`` beside it); :func:`verify_path` stages a pack in a temporary folder and
judges it. Both go through :func:`ongrid_skills.packs.source.stage`, so the digest signed and
the digest verified are those of exactly the files an install would install.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ongrid_skills.packs.files import SIGNATURE_FILE, Limits, replacing
from ongrid_skills.packs.keys import SigningKey, TrustedKeys
from ongrid_skills.packs.manifest import PackManifest
from ongrid_skills.packs.signature import PackSignature, beside, sign
from ongrid_skills.packs.source import staged


class Trust(StrEnum):
    """The verdict on a pack whose signature, if any, is valid."""

    TRUSTED = "trusted"  # signed by a key of the operator's trusted keys
    UNTRUSTED = "untrusted"  # validly signed, by a key the operator does not trust
    UNSIGNED = "unsigned"


@dataclass(frozen=True, slots=True)
class Verification:
    """A pack's digest, its signature (when signed), the verdict and where the signature was."""

    digest: str
    trust: Trust
    signature: PackSignature | None = None
    signature_origin: str | None = None
    manifest: PackManifest | None = None

    @property
    def signer(self) -> str | None:
        """The signer's ``SHA256:`` fingerprint, when signed."""
        return self.signature.signer if self.signature else None

    @property
    def trusted(self) -> bool:
        return self.trust is Trust.TRUSTED

    def to_dict(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "signed": self.signature is not None,
            "signer": self.signer,
            "signer_key": self.signature.key if self.signature else None,
            "signature": self.signature_origin,
            "trust": self.trust.value,
            "trusted": self.trusted,
            "pack": self.manifest.to_dict() if self.manifest else None,
        }


def judge(
    digest: str,
    signature: PackSignature | None,
    trusted: TrustedKeys,
    *,
    origin: str | None = None,
    manifest: PackManifest | None = None,
) -> Verification:
    """The verdict on a pack of ``digest`` carrying ``signature``; BadSignature when invalid."""
    if signature is None:
        return Verification(digest, Trust.UNSIGNED, manifest=manifest)
    signature.check(digest)
    trust = Trust.TRUSTED if signature.trusted_by(trusted) else Trust.UNTRUSTED
    return Verification(digest, trust, signature, origin, manifest)


def verify_path(
    path: Path,
    trusted: TrustedKeys,
    limits: Limits | None = None,
    *,
    signature: Path | None = None,
) -> Verification:
    """Stage the pack at ``path`` in a temporary folder and judge it (see :func:`judge`)."""
    with staged(path, limits, signature=signature) as pack:
        return judge(
            pack.digest,
            pack.signature,
            trusted,
            origin=pack.signature_origin,
            manifest=pack.manifest,
        )


def sign_path(
    path: Path, key: SigningKey, limits: Limits | None = None
) -> tuple[Path, PackSignature]:
    """Sign the pack at ``path``: a folder gets ``pack.sig`` at the pack's root, an archive
    ``<archive>.sig`` beside it. Returns (the file written, the signature)."""
    with staged(path, limits) as pack:
        digest = pack.digest
        inner = pack.root.relative_to(pack.staging)
    made = sign(digest, key)
    target = path / inner / SIGNATURE_FILE if path.is_dir() else beside(path)
    write_atomic(target, made.to_json())
    return target, made


def write_atomic(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` through a temporary file renamed over it (synced first)."""
    with replacing(target) as fh:
        fh.write(text.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())
