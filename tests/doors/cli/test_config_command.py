"""`ongrid-skills config`: the effective settings and where each came from, secrets masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli

SECRETS = ("sk-live-123", "s3cr3t", "vault-abc")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "ongrid.toml"
    path.write_text(
        "[ongrid]\n"
        "default_timeout_seconds = 45\n"
        'external_dirs = ["/from/file"]\n'
        'data_dri = "typo"\n'
        "[ongrid.config]\n"
        'prometheus.url = "http://prom:9090"\n'
        'vault.token = "vault-abc"\n'
    )
    return path


def shown(config: Path, *args: str, **env: str) -> Any:
    done = run_cli(
        "--config",
        str(config),
        "config",
        *args,
        ONGRID_SKILLS_EXTERNAL_DIRS="/from/env",
        ONGRID_LLM_API_KEY="sk-live-123",
        ONGRID_DATABASE_URL="postgresql://ops:s3cr3t@db/ongrid",
        **env,
    )
    assert done.returncode == 0, done.stderr
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr
    return done


def test_json_gives_each_setting_its_value_and_source(config: Path, tmp_path: Path) -> None:
    done = shown(config, "--json", "--data-dir", "here", cwd=tmp_path)
    body = json.loads(done.stdout)
    rows = {row["name"]: row for row in body["settings"]}
    assert rows["data_dir"] == {
        "name": "data_dir",
        "value": str(tmp_path / "here"),
        "source": "flag",
        "where": "--data-dir",
        "env": "ONGRID_DATA_DIR",
    }
    assert (rows["external_dirs"]["value"], rows["external_dirs"]["source"]) == (
        ["/from/env"],
        "env",
    )
    assert rows["external_dirs"]["where"] == "ONGRID_SKILLS_EXTERNAL_DIRS"
    assert rows["default_timeout_seconds"] == {
        "name": "default_timeout_seconds",
        "value": 45,
        "source": "file",
        "where": str(config),
        "env": "ONGRID_DEFAULT_TIMEOUT_SECONDS",
    }
    assert (rows["llm_model"]["value"], rows["llm_model"]["source"]) == (None, "default")
    assert rows["llm_api_key"]["value"] == "********"
    assert rows["database_url"]["value"] == "postgresql://ops:********@db/ongrid"
    assert rows["config.prometheus.url"]["value"] == "http://prom:9090"
    assert rows["config.vault.token"]["value"] == "********"
    assert body["config_file"] == str(config)
    assert body["ignored"] == ["data_dri"]
    assert body["store"] == {
        "data_dir": str(tmp_path / "here"),
        "database": "postgresql://ops:********@db/ongrid",
        "state": "present",  # a database URL: the database is the store
        "problem": None,
    }
    assert (
        done.stderr == f"ongrid-skills: warning: {config}: 'data_dri' is not a setting (ignored)\n"
    )
    assert not (tmp_path / "here").exists()


def test_the_table_has_a_header_and_one_aligned_row_per_setting(
    config: Path, tmp_path: Path
) -> None:
    done = shown(config, cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["SETTING", "VALUE", "SOURCE"]
    column = lines[0].index("VALUE")
    rows = {line.split()[0]: line for line in lines[1:] if line and not line.startswith("store")}
    assert all(row[column - 2 : column] == "  " for row in rows.values())
    assert rows["data_dir"].endswith("default (set with ONGRID_DATA_DIR)")
    assert f"  {tmp_path / '.ongrid'}  " in rows["data_dir"]
    assert rows["default_timeout_seconds"].endswith(f"file {config}")
    assert rows["external_dirs"].endswith("env ONGRID_SKILLS_EXTERNAL_DIRS")
    assert rows["llm_api_key"].split()[1] == "********"
    assert lines[-1] == (
        f"store: {tmp_path / '.ongrid'} (present), database postgresql://ops:********@db/ongrid"
    )


def test_an_api_key_from_the_providers_own_variable_is_masked_and_named(tmp_path: Path) -> None:
    done = run_cli("config", "--json", OPENAI_API_KEY="sk-live-123", cwd=tmp_path)
    assert "sk-live-123" not in done.stdout
    rows = {row["name"]: row for row in json.loads(done.stdout)["settings"]}
    assert (rows["llm_api_key"]["value"], rows["llm_api_key"]["where"]) == (
        "********",
        "OPENAI_API_KEY",
    )
    store = json.loads(done.stdout)["store"]
    assert (store["state"], store["database"]) == (
        "missing",
        f"sqlite:///{tmp_path}/.ongrid/ongrid.db",
    )
    assert list(tmp_path.iterdir()) == []


def test_a_bad_value_exits_2_naming_where_it_was_set(config: Path) -> None:
    env = run_cli("config", ONGRID_EXECUTION_QUEUE_SIZE="many")
    assert env.returncode == 2
    assert env.stderr == (
        "ongrid-skills: ONGRID_EXECUTION_QUEUE_SIZE: execution_queue_size must be an integer, "
        "got 'many'\n"
    )
    config.write_text('[ongrid]\nllm_stream = "sometimes"\n')
    in_file = run_cli("--config", str(config), "config", "--json")
    assert in_file.returncode == 2 and in_file.stdout == ""
    assert in_file.stderr == (
        f"ongrid-skills: {config}: llm_stream must be true or false, got 'sometimes'\n"
    )
    missing = run_cli("--config", str(config.parent / "absent.toml"), "config")
    assert missing.returncode == 2 and "absent.toml" in missing.stderr
