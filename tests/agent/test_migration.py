"""Migration 0002 adds the agent tables to a store created by 0001, keeping what it holds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine

from ongrid_skills.store import open_store
from ongrid_skills.store.connection import MIGRATIONS


def test_a_store_at_0001_is_upgraded_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    engine = create_engine(f"sqlite:///{data / 'ongrid.db'}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    engine.dispose()
    raw = sqlite3.connect(data / "ongrid.db")
    tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "agent_runs" not in tables and "settings" in tables
    with raw:
        raw.execute("INSERT INTO settings (key, value) VALUES ('kept', '\"yes\"')")
    raw.close()

    open_store(str(data)).close()
    raw = sqlite3.connect(data / "ongrid.db")
    try:
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"agent_runs", "agent_messages", "agent_events", "web_sessions"} <= tables
        assert raw.execute("SELECT version_num FROM alembic_version").fetchall() == [("0016",)]
        assert raw.execute("SELECT value FROM settings WHERE key = 'kept'").fetchone() == ('"yes"',)
    finally:
        raw.close()
