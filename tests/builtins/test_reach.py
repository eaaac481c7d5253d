"""The file built-ins reach only the operator's readable roots, and never the manager's own files.

Real files under tmp_path; a real store (SQLite) where the store matters. Every refusal is a
ForbiddenPath (``error.code = forbidden_path``).
"""

from __future__ import annotations

import asyncio
import doctest
import os
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills import ConfigError, Settings
from ongrid_skills.builtins import reach as reach_module
from ongrid_skills.builtins.base import BuiltinContext, ForbiddenPath, Reach
from ongrid_skills.builtins.files import disk_usage, tail_file
from ongrid_skills.store import open_store


def tail(reach: Reach, path: Path | str, **args: Any) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(
        tail_file(BuiltinContext(reach=reach), path=str(path), **args)
    )
    return result


def usage(reach: Reach, path: Path | str) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(disk_usage(BuiltinContext(reach=reach), path=str(path)))
    return result


def settings_reach(tmp_path: Path, **overrides: Any) -> Reach:
    base: dict[str, Any] = {"data_dir": str(tmp_path / "data")}
    base.update(overrides)
    return Reach.from_settings(Settings(**base))


def test_reach_doctests() -> None:
    assert doctest.testmod(reach_module).failed == 0


def test_by_default_only_var_log_is_readable(tmp_path: Path) -> None:
    assert Reach().read_roots == ("/var/log",)
    assert Settings.load(environ={}).builtin_read_paths == ("/var/log",)
    (tmp_path / "app.log").write_text("secret\n")
    for path in ("/etc/passwd", "/etc/hostname", str(tmp_path / "app.log")):
        with pytest.raises(ForbiddenPath, match="outside the readable roots") as caught:
            tail(Reach(), path)
        assert caught.value.code == "forbidden_path"


def test_a_configured_root_is_readable_and_nothing_beside_it(tmp_path: Path) -> None:
    logs, other = tmp_path / "logs", tmp_path / "other"
    logs.mkdir()
    other.mkdir()
    (logs / "app.log").write_text("fine\n")
    (other / "key").write_text("secret\n")
    (logs / "escape.log").symlink_to(other / "key")
    reach = Reach(read_roots=(str(logs),))
    assert tail(reach, logs / "app.log")["lines"] == ["fine"]
    for path in (other / "key", logs / "escape.log", logs / ".." / "other" / "key"):
        with pytest.raises(ForbiddenPath):
            tail(reach, path)


def test_a_missing_file_outside_the_roots_is_refused_not_reported_missing(tmp_path: Path) -> None:
    with pytest.raises(ForbiddenPath):
        tail(Reach(read_roots=(str(tmp_path / "logs"),)), tmp_path / "nope.log")


def test_the_data_dir_is_refused_even_inside_a_readable_root(tmp_path: Path) -> None:
    reach = settings_reach(tmp_path, builtin_read_paths=(str(tmp_path),))
    data = tmp_path / "data"
    data.mkdir()
    (data / "hmac.key").write_text("k\n")
    (tmp_path / "to-data").symlink_to(data)
    (tmp_path / "key-link").symlink_to(data / "hmac.key")
    for path in (
        data / "hmac.key",
        tmp_path / "to-data" / "hmac.key",
        tmp_path / "key-link",
        data / "missing",
    ):
        with pytest.raises(ForbiddenPath, match="manager's own files"):
            tail(reach, path)
    with pytest.raises(ForbiddenPath, match="manager's own files"):
        usage(reach, data)


def test_a_hard_link_to_a_protected_file_is_refused_without_opening_it(tmp_path: Path) -> None:
    reach = settings_reach(tmp_path, builtin_read_paths=(str(tmp_path / "logs"),))
    (tmp_path / "data").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "data" / "hmac.key").write_text("k\n")
    os.link(tmp_path / "data" / "hmac.key", tmp_path / "logs" / "innocent.log")
    with pytest.raises(ForbiddenPath, match="manager's own files"):
        tail(reach, tmp_path / "logs" / "innocent.log")


def test_the_settings_file_and_an_outside_database_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text(f'builtin_read_paths = ["{tmp_path}"]\n')
    database = tmp_path / "elsewhere.db"
    for suffix in ("", "-wal"):
        Path(f"{database}{suffix}").write_text("x\n")
    environ = {
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_DATABASE_URL": f"sqlite:///{database}",
    }
    reach = Reach.from_settings(Settings.load(environ=environ, config=str(config)))
    assert reach.read_roots == (str(tmp_path),)
    for path in (config, database, Path(f"{database}-wal")):
        with pytest.raises(ForbiddenPath, match="manager's own files"):
            tail(reach, path)


def test_the_audit_key_and_the_audit_sink_files_are_refused(tmp_path: Path) -> None:
    key, sink = tmp_path / "keys" / "audit.key", tmp_path / "ship" / "audit.jsonl"
    for path in (key, sink):
        path.parent.mkdir()
        path.write_text("x\n")
    environ = {
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_AUDIT_KEY_FILE": str(key),
        "ONGRID_AUDIT_SINK": str(sink),
        "ONGRID_BUILTIN_READ_PATHS": str(tmp_path),
    }
    reach = Reach.from_settings(Settings.load(environ=environ))
    for path in (key, sink):
        with pytest.raises(ForbiddenPath, match="manager's own files"):
            tail(reach, path)


def test_a_database_the_store_opened_is_refused_whatever_the_reach(tmp_path: Path) -> None:
    """The store registers its files for the whole process: even a bare Reach refuses them."""
    store = open_store(str(tmp_path / "data"), f"sqlite:///{tmp_path / 'own.db'}")
    try:
        reach = Reach(read_roots=(str(tmp_path),))
        for name in ("own.db", "own.db-wal", "own.db-shm"):
            with pytest.raises(ForbiddenPath, match="manager's own files"):
                tail(reach, tmp_path / name)
    finally:
        store.close()


def test_disk_usage_measures_mount_points_and_readable_roots_only(tmp_path: Path) -> None:
    reach = Reach(read_roots=(str(tmp_path / "logs"),))
    (tmp_path / "logs").mkdir()
    assert usage(reach, "/")["mount_point"] == "/"
    assert usage(reach, tmp_path / "logs")["total_bytes"] > 0
    with pytest.raises(ForbiddenPath, match="outside the readable roots"):
        usage(reach, tmp_path)
    with pytest.raises(ForbiddenPath):
        usage(Reach(), "/etc")


def test_legacy_allowed_dirs_refusal_carries_the_forbidden_path_code(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.log").write_text("x\n")
    ctx = BuiltinContext(
        config={"files.allowed_dirs": str(tmp_path / "a")},
        reach=Reach(read_roots=(str(tmp_path),)),
    )
    with pytest.raises(ForbiddenPath, match="allowed directories"):
        asyncio.run(tail_file(ctx, path=str(tmp_path / "b" / "x.log")))


def test_read_paths_come_from_the_environment_or_the_toml_file(tmp_path: Path) -> None:
    env = Settings.load(environ={"ONGRID_BUILTIN_READ_PATHS": "/var/log/app:/srv/logs, /opt/x"})
    assert env.builtin_read_paths == ("/var/log/app", "/srv/logs", "/opt/x")
    assert Settings.load(environ={"ONGRID_BUILTIN_READ_PATHS": ""}).builtin_read_paths == ()
    config = tmp_path / "ongrid.toml"
    config.write_text('[ongrid]\nbuiltin_read_paths = ["/srv/logs"]\n')
    assert Settings.load(environ={}, config=str(config)).builtin_read_paths == ("/srv/logs",)
    with pytest.raises(ConfigError, match="absolute"):
        Settings.load(environ={"ONGRID_BUILTIN_READ_PATHS": "logs"})


def test_an_empty_root_list_reads_nothing(tmp_path: Path) -> None:
    (tmp_path / "x.log").write_text("x\n")
    reach = settings_reach(tmp_path, builtin_read_paths=())
    with pytest.raises(ForbiddenPath, match="builtin_read_paths: none"):
        tail(reach, tmp_path / "x.log")
