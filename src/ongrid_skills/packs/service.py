"""The pack commands of every door, in one place: install (from any source or an upload),
upgrade, rollback, remove, what is installed, what the indexes offer, what is outdated.

:class:`Packs` puts :mod:`.sources` (fetching), :mod:`.index` (the marketplace) and
:class:`~ongrid_skills.packs.install.Installer` (the transaction) together; the runtime builds
it from the settings and the store, and the CLI and the REST door call it (in a worker thread:
every method blocks). The views it returns are plain JSON-ready dicts, the same for the CLI's
``--json`` and the REST answers. It must never reload a registry (the runtime does) nor decide
who may call it (the doors do: admin only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ongrid_skills.errors import Conflict, DigestMismatch, NotFound
from ongrid_skills.packs.home import remove_tree
from ongrid_skills.packs.index import Catalog, load_catalog
from ongrid_skills.packs.install import (
    Candidate,
    Inspection,
    Installer,
    Outcome,
    older_than_active,
)
from ongrid_skills.packs.layout import declared_fields, find_root
from ongrid_skills.packs.manifest import version_key
from ongrid_skills.packs.records import InstalledVersion, iso
from ongrid_skills.packs.sources import (
    SourcePolicy,
    fetch_source,
    from_index,
    pack_ref,
    resolve,
)


class Packs:
    """The installed packs of one data dir and the indexes that offer more."""

    def __init__(
        self, installer: Installer, policy: SourcePolicy, indexes: tuple[str, ...] = ()
    ) -> None:
        self.installer = installer
        self.home = installer.home
        self.records = installer.records
        self.policy = policy
        self.indexes = indexes

    # ---- changes -------------------------------------------------------------------------
    @contextlib.contextmanager
    def work(self) -> Iterator[Path]:
        """A staging folder of this command, removed when the block ends."""
        path = self.home.new_staging()
        try:
            yield path
        finally:
            remove_tree(path)

    def install(
        self,
        source: str,
        actor: str,
        *,
        allow_unsigned: bool = False,
        local: bool = True,
        digest: str | None = None,
        pinned: str = "the request",
    ) -> Outcome:
        """Install ``source`` (a folder, an archive, a URL, a git source, ``ID[@VERSION]``).

        An unpinned ``ID`` never goes back: when the indexes offer only a version older than
        the active one, Conflict, before anything is fetched (``upgrade``'s rule). ``digest``:
        what the pack must be (DigestMismatch naming ``pinned`` otherwise): the digest an
        approved ``install_skill`` request was signed for."""
        with self.work() as work:
            candidate = self._candidate(source, work, local, digest, pinned)
            return self.installer.install(candidate, actor, work, allow_unsigned=allow_unsigned)

    def inspect(
        self, source: str, *, allow_unsigned: bool = False, local: bool = True
    ) -> Inspection:
        """What installing ``source`` would bring (its capability summary), judged by every
        check of an install; nothing changes (the dry run, and an install_skill request)."""
        with self.work() as work:
            candidate = self._candidate(source, work, local, None, "")
            return self.installer.inspect(candidate, work, allow_unsigned=allow_unsigned)

    def dry_run(
        self, source: str, *, allow_unsigned: bool = False, local: bool = True
    ) -> dict[str, Any]:
        """:meth:`inspect` as the doors answer it (see :func:`dry_run_view`)."""
        seen = self.inspect(source, allow_unsigned=allow_unsigned, local=local)
        return dry_run_view(seen, self.home.active().get(seen.summary["id"]))

    def _candidate(
        self, source: str, work: Path, local: bool, digest: str | None, pinned: str
    ) -> Candidate:
        policy = replace(self.policy, local=local)
        ref = pack_ref(source, policy)
        if ref is None:
            candidate = fetch_source(source.strip(), work, policy)
        else:
            entry = resolve(ref, self.catalog())
            unpinned = ref.version is None
            if unpinned:
                active = self.home.active().get(entry.pack_id)
                older = active and older_than_active(entry.pack_id, entry.version, active)
                if older:
                    raise Conflict(older)
            candidate = replace(from_index(entry, work, policy), newest_only=unpinned)
        if digest is None:
            return candidate
        if candidate.digest is not None and candidate.digest != digest:
            raise DigestMismatch(
                f"{source} changed since {pinned}: the index named {digest}, it now names "
                f"{candidate.digest}; not installed (ask again to review the new contents)"
            )
        return replace(candidate, digest=digest, pinned=pinned)

    def install_file(
        self,
        archive: Path,
        actor: str,
        work: Path,
        *,
        shown: str,
        signature: Path | None = None,
        allow_unsigned: bool = False,
        digest: str | None = None,
        pinned: str = "the request",
    ) -> Outcome:
        """Install an uploaded archive (already written under ``work``): a remote source.
        ``digest``: what it must be (DigestMismatch naming ``pinned`` otherwise)."""
        candidate = _uploaded(archive, shown, signature)
        if digest is not None:
            candidate = replace(candidate, digest=digest, pinned=pinned)
        return self.installer.install(candidate, actor, work, allow_unsigned=allow_unsigned)

    def inspect_file(
        self,
        archive: Path,
        work: Path,
        *,
        shown: str,
        signature: Path | None = None,
        allow_unsigned: bool = False,
    ) -> Inspection:
        """What installing an uploaded archive would bring; nothing changes."""
        candidate = _uploaded(archive, shown, signature)
        return self.installer.inspect(candidate, work, allow_unsigned=allow_unsigned)

    def upgrade(self, pack_id: str, actor: str, *, allow_unsigned: bool = False) -> Outcome:
        """Install the newest version the indexes offer, when it is newer than the active one."""
        active = self.home.active().get(pack_id)
        if active is None:
            raise NotFound(f"no pack {pack_id!r} is installed")
        newest = self.catalog().resolve(pack_id)
        if version_key(newest.version) <= version_key(active):
            older = older_than_active(pack_id, newest.version, active)
            record = self._record(pack_id, active)
            said = (f"warning: {older}",) if older else ()
            return Outcome("unchanged", pack_id, active, active, record, said)
        with self.work() as work:
            candidate = replace(from_index(newest, work, self.policy), newest_only=True)
            return self.installer.install(candidate, actor, work, allow_unsigned=allow_unsigned)

    def rollback(self, pack_id: str, actor: str) -> Outcome:
        return self.installer.rollback(pack_id, actor)

    def remove(self, pack_id: str, actor: str) -> Outcome:
        return self.installer.remove(pack_id, actor)

    def recover(self, wait: float | None = None) -> None:
        """Finish or undo what a killed command left (under the packs lock; Conflict when
        another command holds it longer than ``wait`` seconds: that one recovers)."""
        with self.home.lock() if wait is None else self.home.lock(wait):
            self.installer.recover()

    # ---- views ---------------------------------------------------------------------------
    def installed(self) -> list[dict[str, Any]]:
        """Every active pack: its active version's record, the versions kept, any change
        left pending."""
        active = self.home.active()
        rows = self.records.versions()
        pending = {change.pack_id: change.action for change in self.records.pending()}
        return [
            self._view(pack_id, version, [r for r in rows if r.pack_id == pack_id], pending)
            for pack_id, version in active.items()
        ]

    def show(self, pack_id: str) -> dict[str, Any]:
        """One installed pack (see :meth:`installed`); NotFound when none is active."""
        version = self.home.active().get(pack_id)
        if version is None:
            raise NotFound(f"no pack {pack_id!r} is installed")
        pending = {change.pack_id: change.action for change in self.records.pending()}
        return self._view(pack_id, version, self.records.versions(pack_id), pending)

    def _view(
        self,
        pack_id: str,
        version: str,
        rows: list[InstalledVersion],
        pending: dict[str, str],
    ) -> dict[str, Any]:
        current = next((r for r in rows if r.version == version), None)
        if current is not None:
            view = current.to_dict()
        else:  # installed by a data dir whose record is elsewhere: what the link says
            view = {"id": pack_id, "version": version, "description": None, "skills": []}
        kept = [
            r
            for r in rows
            if r.version != version and r.withdrawn_at is None and r.activated_at is not None
        ]
        previous = max(kept, key=lambda r: r.activated_at or 0.0) if kept else None
        view["previous_version"] = previous.version if previous else None
        view["versions"] = [
            {
                "version": r.version,
                "state": _state(r, version, previous),
                "digest": r.digest,
                "installed_at": iso(r.installed_at),
                "activated_at": iso(r.activated_at),
                "withdrawn_at": iso(r.withdrawn_at),
            }
            for r in sorted(rows, key=lambda r: version_key(r.version), reverse=True)
        ]
        view["pending"] = pending.get(pack_id)
        folder = self.home.version_dir(pack_id, version)
        view["path"] = str(folder)
        # A plugin manifest's other fields (openclaw's kind, channels, configSchema…): kept in
        # the pack's files, shown with it.
        view["declared"] = declared_fields(find_root(folder)) if folder.is_dir() else None
        return view

    def _record(self, pack_id: str, version: str) -> InstalledVersion | None:
        return next((r for r in self.records.versions(pack_id) if r.version == version), None)

    def catalog(self) -> Catalog:
        """The merged indexes (read anew at each call: they are small and may change)."""
        return load_catalog(self.indexes, self.policy.fetch)

    def available(self, text: str = "", catalog: Catalog | None = None) -> dict[str, Any]:
        """What the indexes offer whose id or description holds ``text``, with the version
        installed here; ``problems`` names the indexes that could not be read. ``catalog``:
        one already read (a page shows both this and :meth:`outdated` from one reading)."""
        catalog = catalog or self.catalog()
        active = self.home.active()
        items = []
        for pack in catalog.search(text):
            item = pack.to_dict()
            item["installed"] = active.get(pack.pack_id)
            items.append(item)
        return {"items": items, "problems": catalog.problems}

    def outdated(self, catalog: Catalog | None = None) -> dict[str, Any]:
        """Installed packs an index offers a newer version of."""
        catalog = catalog or self.catalog()
        items = []
        for pack_id, version in self.home.active().items():
            pack = catalog.packs.get(pack_id)
            if pack is None:
                continue
            newest = pack.newest()
            if version_key(newest.version) > version_key(version):
                items.append({"id": pack_id, "installed": version, "newest": newest.version})
        return {"items": items, "problems": catalog.problems}


def _uploaded(archive: Path, shown: str, signature: Path | None) -> Candidate:
    name = shown.rsplit("/", 1)[-1]
    return Candidate(archive, f"upload:{name}", True, signature, name=name or None)


def dry_run_view(inspection: Inspection, active: str | None) -> dict[str, Any]:
    """A dry run's answer: what the pack brings and the version of it active here now."""
    return {
        "dry_run": True,
        "id": inspection.summary["id"],
        "version": inspection.summary["version"],
        "installed": active,
        "summary": inspection.summary,
        "warnings": list(inspection.warnings),
    }


def _state(row: InstalledVersion, active: str, previous: InstalledVersion | None) -> str:
    if row.version == active:
        return "active"
    if previous is not None and row.version == previous.version:
        return "previous"
    if row.withdrawn_at is not None:
        return "withdrawn"  # its files go once no call runs on them
    return "pending"  # placed by a change not committed yet
