"""What is recorded of installed packs, and the port through which an install records it.

An install keeps two things: the files (``packs/<id>/<version>``, and the ``.active/<id>`` link
that says which version is active: :mod:`ongrid_skills.skills.packroots`) and a record of each
installed version (:class:`InstalledVersion`: id, version, source, digest, signer, who, when).
The record lives in the store, behind the :class:`PackRecords` protocol, so this package never
imports the store: the runtime hands the store's implementation to the installer.

A change (:class:`Change`) is recorded in two steps around the switch of the link:

- ``begin`` — before any file moves: the new version's row (when there is one) and the change
  itself, as pending, in one transaction;
- ``commit`` — once the link is switched: the pending change is cleared, the versions are
  updated (activated, withdrawn) and the audit entry appended, in one transaction; ``abort``
  clears a change whose switch never happened.

A process killed between the two leaves a pending change; the next pack command (or the
server's start) looks at the link and commits or aborts it, so the record always ends up
saying what the files say. This module holds plain data and a protocol; it must never touch a
file or a database.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol


def iso(ts: float | None) -> str | None:
    """An RFC 3339 UTC time, as every API of ours shows times."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class InstalledVersion:
    """One installed version of a pack, as recorded.

    ``activated_at`` is when it last became the active version (None: never), ``withdrawn_at``
    when it stopped being kept (removed, or older than the rollback target): its files are
    deleted once ``keep_seconds`` have passed and no call of its skills runs.
    """

    pack_id: str
    version: str
    digest: str
    source: str
    signer: str | None
    trust: str  # trusted | untrusted | unsigned
    layout: str
    description: str
    homepage: str | None
    skills: tuple[str, ...]
    personas: tuple[str, ...]
    keep_seconds: int
    installed_by: str
    installed_at: float
    activated_at: float | None = None
    withdrawn_at: float | None = None
    #: What the version brings, as the install saw it (.summary; None: installed before 0011).
    summary: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"{self.pack_id}@{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.pack_id,
            "version": self.version,
            "description": self.description,
            "homepage": self.homepage,
            "layout": self.layout,
            "digest": self.digest,
            "source": self.source,
            "signer": self.signer,
            "trust": self.trust,
            "skills": list(self.skills),
            "personas": list(self.personas),
            "installed_by": self.installed_by,
            "installed_at": iso(self.installed_at),
            "activated_at": iso(self.activated_at),
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where the version an install makes active came from, as that install found it: its
    source, signer and trust. Every install records its own (with the change's actor and time
    as who and when), also one that finds the same files still kept from an earlier install
    from elsewhere: the record is applied to the version's row when the change is committed,
    so an install that never happened never rewrites it."""

    source: str
    signer: str | None
    trust: str  # trusted | untrusted | unsigned


@dataclass(frozen=True, slots=True)
class Change:
    """One change of a pack's active version: ``install`` (none was active), ``upgrade`` or
    ``downgrade`` (another version becomes active), ``rollback`` (back to the previous one),
    ``remove`` (none active any more). ``details`` goes into the audit entry; ``installed`` is
    the provenance of what an install, upgrade or downgrade makes active (None otherwise)."""

    action: str
    pack_id: str
    from_version: str | None
    to_version: str | None
    actor: str
    at: float
    details: dict[str, Any] = field(default_factory=dict)
    installed: Provenance | None = None

    def audit_data(self, version: InstalledVersion | None) -> dict[str, Any]:
        """The audit entry's data: who is in the entry itself; here id, versions, source,
        digest and signer of the version made active (or removed)."""
        data: dict[str, Any] = {
            "id": self.pack_id,
            "version": self.to_version,
            "from_version": self.from_version,
        }
        if version is not None:
            data.update(
                source=version.source,
                digest=version.digest,
                signer=version.signer,
                trust=version.trust,
            )
        data.update(self.details)
        return data

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PackRecords(Protocol):
    """The record of installed packs (implemented by the store, for one data dir)."""

    def versions(self, pack_id: str | None = None) -> list[InstalledVersion]:
        """Every recorded version (withdrawn ones too), of one pack or of all."""
        ...

    def pending(self) -> list[Change]:
        """The changes begun and neither committed nor aborted."""
        ...

    def begin(self, change: Change, added: InstalledVersion | None) -> None:
        """Record ``added`` (a new version's row, replacing a withdrawn one of the same version)
        and ``change`` as pending, in one transaction."""
        ...

    def commit(self, change: Change, *, keep: tuple[str, ...], recovered: bool = False) -> None:
        """The switch happened: clear ``change``, mark ``to_version`` activated (with the
        change's provenance, who and when, when it has one), withdraw every version of the
        pack not in ``keep``, and append the audit entry, in one transaction."""
        ...

    def abort(self, change: Change) -> None:
        """The switch did not happen: clear ``change``; a version it added and that was never
        active is withdrawn (its files are deleted by the next sweep)."""
        ...

    def forget(self, pack_id: str, version: str) -> None:
        """Delete a withdrawn version's row (its files are gone)."""
        ...

    def busy_skills(self) -> set[str]:
        """Names of the skills with a call queued or running (whose files must stay)."""
        ...
