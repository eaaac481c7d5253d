"""The record of installed packs on both engines: an install of files still kept from an earlier
install writes its own provenance (source, signer, trust, who, when) when it commits, and one
that is aborted leaves the row saying where those files came from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect

from ongrid_skills.packs.records import Change, InstalledVersion, Provenance
from ongrid_skills.store import Store, connection, open_store
from ongrid_skills.store.connection import MIGRATIONS
from ongrid_skills.store.packs import PackRepo

FOLDER = Provenance("/srv/ops", None, "unsigned")
ARCHIVE = Provenance("https://packs.example.com/ops-1.0.0.tar.gz", "SHA256:" + "k" * 43, "trusted")


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    with closing(open_store(str(tmp_path / "data"), database_url)) as s:
        yield s


def version(at: float) -> InstalledVersion:
    return InstalledVersion(
        pack_id="ops",
        version="1.0.0",
        digest="sha256:" + "d" * 64,
        source=FOLDER.source,
        signer=FOLDER.signer,
        trust=FOLDER.trust,
        layout="pack",
        description="ops",
        homepage=None,
        skills=("probe",),
        personas=(),
        keep_seconds=3600,
        installed_by="cli:ada",
        installed_at=at,
    )


def installed_then_removed(packs: PackRepo) -> None:
    first = Change("install", "ops", None, "1.0.0", "cli:ada", 100.0, {}, FOLDER)
    packs.begin(first, version(100.0))
    packs.commit(first, keep=("1.0.0",))
    gone = Change("remove", "ops", "1.0.0", None, "cli:ada", 200.0)
    packs.begin(gone, None)
    packs.commit(gone, keep=())


def test_an_install_of_kept_files_records_its_own_provenance_when_it_commits(
    store: Store,
) -> None:
    packs = store.packs("home-1")
    installed_then_removed(packs)
    again = Change("install", "ops", None, "1.0.0", "admin2", 300.0, {}, ARCHIVE)
    packs.begin(again, None)  # the files of 1.0.0 are still kept: no new row
    (pending,) = packs.pending()
    assert pending.installed == ARCHIVE  # what a recovery would commit

    packs.commit(again, keep=("1.0.0",))

    (row,) = packs.versions("ops")
    assert (row.source, row.signer, row.trust) == (ARCHIVE.source, ARCHIVE.signer, "trusted")
    assert (row.installed_by, row.installed_at, row.activated_at) == ("admin2", 300.0, 300.0)
    assert row.withdrawn_at is None
    (entry, *_) = store.audit.entries(action="pack.install")
    assert (entry["actor"], entry["data"]["source"]) == ("admin2", ARCHIVE.source)


def test_an_aborted_install_leaves_the_kept_files_provenance_as_it_was(store: Store) -> None:
    packs = store.packs("home-1")
    installed_then_removed(packs)
    again = Change("install", "ops", None, "1.0.0", "admin2", 300.0, {}, ARCHIVE)
    packs.begin(again, None)

    packs.abort(again)  # the link was never switched

    (row,) = packs.versions("ops")
    assert (row.source, row.trust, row.installed_by) == (FOLDER.source, "unsigned", "cli:ada")
    assert (row.installed_at, row.withdrawn_at) == (100.0, 200.0)
    assert packs.pending() == []


def test_the_summary_is_kept_with_the_version_and_migration_0011_goes_down_and_up(
    tmp_path: Path, database_url: str | None
) -> None:
    data = tmp_path / "data"
    summary = {"id": "ops", "skills": [{"name": "probe", "class": "safe"}], "warnings": []}
    with closing(open_store(str(data), database_url)) as store:
        packs = store.packs("home-1")
        first = Change("install", "ops", None, "1.0.0", "cli:ada", 100.0, {}, FOLDER)
        packs.begin(first, replace(version(100.0), summary=summary))
        packs.commit(first, keep=("1.0.0",))
        assert packs.versions("ops")[0].summary == summary
    engine = create_engine(connection.database_url(str(data), database_url))
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0010")
            columns = {c["name"] for c in inspect(conn).get_columns("pack_versions")}
            assert "summary" not in columns
            assert "preview" not in {c["name"] for c in inspect(conn).get_columns("approvals")}
    finally:
        engine.dispose()
    with closing(open_store(str(data), database_url)) as store:  # migrates up again
        (row,) = store.packs("home-1").versions("ops")
        assert (row.version, row.summary) == ("1.0.0", None)
