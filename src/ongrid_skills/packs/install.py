"""Installing, upgrading, rolling back and removing packs: all or nothing, one switch each.

An install, under the packs lock (:meth:`PackHome.lock`), in this order:

1. **recover** — finish what a killed command left (:meth:`Installer.recover`);
2. **stage** — copy or unpack the candidate into ``packs/.staging`` (the rules of
   :mod:`.source`), judge its signature (:mod:`.trust`) by the trust policy (a remote source
   must be signed by a trusted key unless ``allow_unsigned``; a local one may be unsigned or
   untrusted, with a warning), check it is the pack an index named (digest, signer), load
   and lint every skill and persona (:mod:`.contents`), refuse names taken by loaded skills
   or personas (each listed);
3. **begin** — record the new version and the change, pending, with this install's
   provenance (:class:`PackRecords`);
4. **place** — rename the staged folder, read-only, into ``packs/<id>/<version>``;
5. **switch** — replace the ``.active/<id>`` link in one rename: this is the moment the change
   happens, for every reader (the registry of a server, a CLI's ``list``);
6. **commit** — record the change done, with its audit entry; the version's row takes the
   change's provenance, actor and time (also when it reuses files kept from an earlier install).

A failure before 5 changes nothing anyone sees; a process killed between two steps leaves a
pending change that the next command commits (the link was switched) or aborts (it was not).
Upgrades keep the previous version beside the new one (``rollback`` switches back to it);
other versions, and every version of a removed pack, are *withdrawn*: their files are deleted
once their skills' longest timeout has passed and no call of them runs, so calls in flight
finish on the files they started with.

It never fetches anything (:mod:`.fetch` and :mod:`.git` do, before) and never reloads a
registry: whoever holds one watches the links (``runtime``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ongrid_skills.errors import (
    Conflict,
    DigestMismatch,
    NotFound,
    SkillCollision,
    UntrustedPack,
)
from ongrid_skills.packs.contents import PackContents, inspect_pack
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.home import PackHome
from ongrid_skills.packs.keys import TrustedKeys
from ongrid_skills.packs.manifest import version_key
from ongrid_skills.packs.records import Change, InstalledVersion, PackRecords, Provenance
from ongrid_skills.packs.source import StagedPack, stage
from ongrid_skills.packs.summary import capability_summary
from ongrid_skills.packs.trust import Trust, Verification, judge
from ongrid_skills.skills.registry import Registry

#: Test hook: the name of a step (``validated``, ``begun``, ``placed``, ``switched``) at which
#: a pack command stops, says so on stderr and waits to be killed. Only the test suite sets it.
PAUSE_VARIABLE = "ONGRID_TEST_PACK_PAUSE"
#: Added to a version's longest skill timeout: how long its files outlive its withdrawal.
KEEP_MARGIN_SECONDS = 60


def checkpoint(name: str) -> None:
    """Stop here for good when the test hook names this step (see :data:`PAUSE_VARIABLE`)."""
    if os.environ.get(PAUSE_VARIABLE) == name:
        sys.stderr.write(f"pack: paused at {name}\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pack to install, on this host: a folder or an archive (fetched already when it came
    from a URL or a git remote), and what it must be."""

    path: Path
    source: str  # as recorded and audited (credentials and queries of URLs left out)
    remote: bool  # from a URL, a git remote or an upload: must be signed by a trusted key
    signature: Path | None = None
    name: str | None = None  # what a bare skills folder's id is made from
    digest: str | None = None  # an index's digest: what is staged must have it
    signer: str | None = None  # an index's signer: the signature must be this key's
    via: str | None = None  # the index it was resolved through
    newest_only: bool = False  # an unpinned pack id: never replaces a newer active version
    pinned: str | None = None  # what bound ``digest`` when no index did (an approval request)


def older_than_active(pack_id: str, offered: str, active: str) -> str | None:
    """Why the indexes' newest ``offered`` may not replace ``active`` (None when it may): an
    unpinned install or an upgrade never goes back, whatever a stale mirror or a tampered
    index offers. Only ``ID@VERSION`` (or a file, or a rollback) installs an older version."""
    if version_key(offered) >= version_key(active):
        return None
    return (
        f"the indexes offer {pack_id} {offered} at most, older than the active {active} (a "
        f"stale mirror, or an index that is not what it was?): nothing changed; install "
        f"{pack_id}@{offered} to go back to it on purpose"
    )


@dataclass(frozen=True, slots=True)
class Inspection:
    """A staged pack judged as an install would judge it: the verdict on its signature, its
    contents, its capability summary (:mod:`.summary`) and the warnings an install would print."""

    verdict: Verification
    contents: PackContents
    summary: dict[str, Any]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command changed: ``action`` is install, upgrade, downgrade, rollback, remove or
    unchanged; ``version`` the active version after it (None once removed)."""

    action: str
    pack_id: str
    version: str | None
    from_version: str | None
    record: InstalledVersion | None = None
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = field(default_factory=tuple)
    removed: bool | None = None  # a remove: whether it withdrew a version (False: none active)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.action,
            "id": self.pack_id,
            "version": self.version,
            "from_version": self.from_version,
            "pack": self.record.to_dict() if self.record else None,
            "warnings": list(self.warnings),
            "problems": list(self.problems),
        }
        if self.removed is not None:
            out["removed"] = self.removed
        return out


class Installer:
    """The changes of the installed packs of one data dir."""

    def __init__(
        self,
        home: PackHome,
        records: PackRecords,
        *,
        trusted: TrustedKeys,
        loaded: Callable[[], Registry],
        limits: Limits | None = None,
        config: Mapping[str, str] | None = None,
        keep_seconds: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``loaded`` gives the registry names are checked against (a server's current one,
        or a CLI's load of the same settings); ``keep_seconds`` how long a withdrawn version's
        files stay (None: its skills' longest timeout plus a minute)."""
        self.home = home
        self.records = records
        self.trusted = trusted
        self.loaded = loaded
        self.limits = limits or Limits()
        self.config = config or {}
        self.keep_seconds = keep_seconds
        self.clock = clock

    # ---- install -------------------------------------------------------------------------
    def install(
        self, candidate: Candidate, actor: str, work: Path, *, allow_unsigned: bool = False
    ) -> Outcome:
        """Install ``candidate`` and make it the active version of its pack.

        ``work`` is a staging folder of this command (:meth:`PackHome.new_staging`). Raises
        PackError/UnsafePack (not a valid pack), BadSignature/DigestMismatch, UntrustedPack,
        SkillCollision or Conflict; nothing changes then.
        """
        with self.home.lock():
            self.recover()
            staged = stage(
                candidate.path,
                work,
                self.limits,
                signature=candidate.signature,
                name=candidate.name,
            )
            try:
                return self._install(staged, candidate, actor, allow_unsigned)
            finally:
                staged.discard()

    def inspect(
        self, candidate: Candidate, work: Path, *, allow_unsigned: bool = False
    ) -> Inspection:
        """What installing ``candidate`` would bring (its capability summary), by the very
        checks of an install (safety, limits, signature and trust, contents, names taken by
        what is loaded now), with nothing changed: no lock, no record, no file outside
        ``work``."""
        staged = stage(
            candidate.path, work, self.limits, signature=candidate.signature, name=candidate.name
        )
        try:
            seen = self._inspect(staged, candidate, allow_unsigned)
        finally:
            staged.discard()
        manifest = staged.manifest
        active = self.home.active().get(manifest.id)
        own = next((r for r in self.records.versions(manifest.id) if r.version == active), None)
        names = seen.contents.skill_names(), seen.contents.persona_names()
        self._check_names(manifest.label, *names, own)
        return seen

    def _inspect(
        self, staged: StagedPack, candidate: Candidate, allow_unsigned: bool
    ) -> Inspection:
        manifest = staged.manifest
        verdict = judge(
            staged.digest,
            staged.signature,
            self.trusted,
            origin=staged.signature_origin,
            manifest=manifest,
        )
        warnings = self._check_trust(verdict, candidate, allow_unsigned)
        contents = inspect_pack(staged.detected, config=self.config)
        contents.raise_for_errors(manifest.label)
        warnings += [p.format() for p in contents.warnings]
        summary = capability_summary(staged, verdict, contents, candidate.source)
        return Inspection(verdict, contents, summary, tuple(warnings))

    def _install(
        self, staged: StagedPack, candidate: Candidate, actor: str, allow_unsigned: bool
    ) -> Outcome:
        manifest = staged.manifest
        seen = self._inspect(staged, candidate, allow_unsigned)
        verdict, contents, warnings = seen.verdict, seen.contents, list(seen.warnings)
        pack_id, version = manifest.id, manifest.version
        active = self.home.active().get(pack_id)
        if candidate.newest_only and active is not None:
            older = older_than_active(pack_id, version, active)
            if older is not None:
                raise Conflict(older)
        rows = {row.version: row for row in self.records.versions(pack_id)}
        kept = rows.get(version)
        if active == version:
            if kept is not None and kept.digest == staged.digest:
                return Outcome("unchanged", pack_id, version, version, kept, tuple(warnings))
            raise Conflict(
                f"{manifest.label} is installed with another digest: a changed pack needs a "
                "new version (or remove the pack first)"
            )
        reuse = self.home.has_version(pack_id, version)
        if reuse and (kept is None or kept.digest != staged.digest):
            raise Conflict(
                f"the files of another {manifest.label} are still kept (a call may run on "
                "them): install another version, or retry once they are deleted"
            )
        own = rows[active] if active is not None and active in rows else None
        self._check_names(manifest.label, contents.skill_names(), contents.persona_names(), own)
        checkpoint("validated")
        now = self.clock()
        if active is None:
            action = "install"
        elif version_key(version) > version_key(active):
            action = "upgrade"
        else:
            action = "downgrade"
        record = InstalledVersion(
            pack_id=pack_id,
            version=version,
            digest=staged.digest,
            source=candidate.source,
            signer=verdict.signer,
            trust=verdict.trust.value,
            layout=staged.detected.layout.value,
            description=manifest.description,
            homepage=manifest.homepage,
            skills=tuple(contents.skill_names()),
            personas=tuple(contents.persona_names()),
            keep_seconds=self._keep(contents),
            installed_by=actor,
            installed_at=now,
            summary=seen.summary,
        )
        details = {"via": candidate.via} if candidate.via else {}
        provenance = Provenance(record.source, record.signer, record.trust)
        change = Change(action, pack_id, active, version, actor, now, details, provenance)
        # Files kept from an earlier install of the same digest are used again; their row is
        # kept until the commit gives it this install's provenance (an install that never
        # happens leaves it saying where those files came from).
        self.records.begin(change, None if reuse else record)
        checkpoint("begun")
        if not reuse:
            self.home.place(staged.root, pack_id, version)
        checkpoint("placed")
        self.home.switch(pack_id, version)
        checkpoint("switched")
        keep = (version, active) if active is not None else (version,)
        self.records.commit(change, keep=keep)
        self.collect()
        done = replace(record, activated_at=now, withdrawn_at=None)
        return Outcome(action, pack_id, version, active, done, tuple(warnings))

    def _check_trust(
        self, verdict: Verification, candidate: Candidate, allow_unsigned: bool
    ) -> list[str]:
        if candidate.digest is not None and verdict.digest != candidate.digest:
            if candidate.pinned is not None:
                raise DigestMismatch(
                    f"{candidate.source} changed since {candidate.pinned}: it was "
                    f"{candidate.digest}, it is now {verdict.digest}; not installed (ask again "
                    "to review the new contents)"
                )
            raise DigestMismatch(
                f"the index names {candidate.digest}, but what was fetched from "
                f"{candidate.source} is {verdict.digest}: not installed"
            )
        if candidate.signer is not None and verdict.signer != candidate.signer:
            found = verdict.signer or "no signature"
            raise DigestMismatch(
                f"the index says the pack is signed by {candidate.signer}; it carries {found}"
            )
        if verdict.trust is Trust.TRUSTED:
            return []
        why = (
            "it is not signed"
            if verdict.trust is Trust.UNSIGNED
            else f"its signer {verdict.signer} is not a trusted key"
        )
        if candidate.remote and not allow_unsigned:
            raise UntrustedPack(
                f"{candidate.source}: {why} (ONGRID_TRUSTED_PACK_KEYS); a pack from a remote "
                "source installs only when signed by a trusted key, or with allow_unsigned"
            )
        return [f"warning: {why}: installed on your word"]

    def _check_names(
        self,
        label: str,
        skills: list[str],
        personas: list[str],
        own: InstalledVersion | None,
    ) -> None:
        """SkillCollision listing every skill and persona name the loaded registry already
        has, except those of this pack's active version (an upgrade replaces them)."""
        registry = self.loaded()
        mine_skills = set(own.skills) if own else set()
        mine_personas = set(own.personas) if own else set()
        found: list[tuple[str, str, str]] = []
        for name in skills:
            skill = registry.skills.get(name)
            if skill is not None and name not in mine_skills:
                found.append(("skill", name, skill.origin or skill.source))
        for name in personas:
            persona = registry.personas.get(name)
            if persona is not None and name not in mine_personas:
                found.append(("persona", name, persona.origin))
        if found:
            raise SkillCollision(label, found)

    def _keep(self, contents: PackContents) -> int:
        if self.keep_seconds is not None:
            return self.keep_seconds
        longest = max((skill.timeout_seconds for skill in contents.skills), default=0)
        return longest + KEEP_MARGIN_SECONDS

    # ---- rollback and remove -------------------------------------------------------------
    def rollback(self, pack_id: str, actor: str) -> Outcome:
        """Switch back to the version that was active before the current one."""
        with self.home.lock():
            self.recover()
            active = self._active(pack_id)
            rows = self.records.versions(pack_id)
            previous = [
                row
                for row in rows
                if row.version != active
                and row.withdrawn_at is None
                and row.activated_at is not None
                and self.home.has_version(pack_id, row.version)
            ]
            if not previous:
                raise Conflict(f"pack {pack_id} has no previous version to roll back to")
            target = max(previous, key=lambda row: row.activated_at or 0.0)
            own = next((row for row in rows if row.version == active), None)
            self._check_names(target.label, list(target.skills), list(target.personas), own)
            change = Change("rollback", pack_id, active, target.version, actor, self.clock())
            self.records.begin(change, None)
            checkpoint("begun")
            self.home.switch(pack_id, target.version)
            checkpoint("switched")
            self.records.commit(change, keep=(target.version, active))
            done = replace(target, activated_at=change.at)
            return Outcome("rollback", pack_id, target.version, active, done)

    def remove(self, pack_id: str, actor: str) -> Outcome:
        """Withdraw every skill and persona of the pack at once (its files follow later).

        Idempotent: a pack that is not active (removed already, or never installed) changes
        nothing and says so (``unchanged``, ``removed`` false), so a retried removal is safe."""
        with self.home.lock():
            self.recover()
            active = self.home.active().get(pack_id)
            if active is None:
                note = f"pack {pack_id} is not installed (removed already?): nothing changed"
                return Outcome("unchanged", pack_id, None, None, None, (note,), removed=False)
            record = next((r for r in self.records.versions(pack_id) if r.version == active), None)
            change = Change("remove", pack_id, active, None, actor, self.clock())
            self.records.begin(change, None)
            checkpoint("begun")
            self.home.withdraw(pack_id)
            checkpoint("switched")
            self.records.commit(change, keep=())
            self.collect()
            return Outcome("remove", pack_id, None, active, record, removed=True)

    def _active(self, pack_id: str) -> str:
        active = self.home.active().get(pack_id)
        if active is None:
            raise NotFound(f"no pack {pack_id!r} is installed")
        return active

    # ---- recovery and clean-up -----------------------------------------------------------
    def recover(self) -> None:
        """Commit or abort the changes a killed command left pending (by what the link says),
        then delete what is due. Called under the lock, by every change, and at a server's
        start."""
        active = self.home.active()
        for change in self.records.pending():
            if active.get(change.pack_id) == change.to_version:
                keep = tuple(v for v in (change.to_version, change.from_version) if v)
                self.records.commit(change, keep=keep, recovered=True)
            else:
                self.records.abort(change)
        self.collect()
        self.home.sweep_staging()

    def collect(self) -> None:
        """Delete the files (and then the rows) of withdrawn versions whose time has come and
        none of whose skills has a call running."""
        now = self.clock()
        active = self.home.active()
        busy: set[str] | None = None
        for row in self.records.versions():
            if row.withdrawn_at is None or active.get(row.pack_id) == row.version:
                continue
            if now < row.withdrawn_at + row.keep_seconds:
                continue
            if busy is None:
                busy = self.records.busy_skills()
            if busy & set(row.skills):
                continue
            self.home.delete_version(row.pack_id, row.version)
            self.records.forget(row.pack_id, row.version)
