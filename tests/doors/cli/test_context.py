"""One data dir, never a surprise: which store a command uses, who may create one, and what a
command says when there is none (a real process per invocation, in pipes)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ongrid_skills.builtins.reach import Reach  # noqa: F401 - imported before dropping privileges
from ongrid_skills.doors.cli.main import cli
from tests.support.cli import run_cli
from tests.support.unprivileged import run_unprivileged

DEFAULT_WHENCE = "(the default data dir: ./.ongrid under the current directory)"
READERS = (["token", "list"], ["token", "revoke", "x"], ["audit", "verify"], ["audit", "list"])


def created_token(data: Path, *extra: str) -> str:
    done = run_cli("token", "create", "--role", "admin", "--name", "ada", *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("argv", READERS, ids=" ".join)
def test_a_reader_without_a_store_exits_2_naming_the_absolute_path_and_creates_nothing(
    tmp_path: Path, argv: list[str]
) -> None:
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    first, second = done.stderr.splitlines()
    assert first == f"ongrid-skills: no store in {tmp_path / '.ongrid'} {DEFAULT_WHENCE}"
    assert "--data-dir DIR or ONGRID_DATA_DIR" in second
    assert "`ongrid-skills token create --init …`" in second
    assert list(tmp_path.iterdir()) == []


def test_a_reader_never_creates_a_store_even_in_a_dir_it_was_pointed_at(tmp_path: Path) -> None:
    """`audit verify` on an empty new store would say "0 entries, intact" about the wrong dir."""
    wanted = tmp_path / "typo"
    by_env = run_cli("audit", "verify", ONGRID_DATA_DIR=str(wanted))
    assert by_env.returncode == 2
    assert by_env.stderr.startswith(
        f"ongrid-skills: no store in {wanted} (set by ONGRID_DATA_DIR)\n"
    )
    by_flag = run_cli("audit", "verify", "--data-dir", str(wanted))
    assert by_flag.returncode == 2
    assert f"no store in {wanted} (given with --data-dir)" in by_flag.stderr
    assert not wanted.exists()


def test_token_create_makes_a_store_only_with_init_or_an_explicit_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    refused = run_cli("token", "create", "--role", "admin", "--name", "ada", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert f"no store in {tmp_path / '.ongrid'}" in refused.stderr
    refused_env = run_cli(
        "token", "create", "--role", "admin", "--name", "ada", ONGRID_DATA_DIR=str(data)
    )
    assert refused_env.returncode == 2 and not data.exists()
    token = created_token(data, "--data-dir", str(data))
    assert token.startswith("ogs_") and (data / "ongrid.db").is_file()
    other = tmp_path / "other"
    made = run_cli(
        "token", "create", "--init", "--role", "viewer", "--name", "vic", ONGRID_DATA_DIR=str(other)
    )
    assert made.returncode == 0, made.stderr
    listed = run_cli("token", "list", "--json", "--data-dir", str(other))
    assert listed.returncode == 0 and '"vic"' in listed.stdout


def test_verbose_says_which_store_and_where_its_setting_came_from(tmp_path: Path) -> None:
    data = tmp_path / "data"
    created_token(data, "--data-dir", str(data))
    done = run_cli("token", "list", "-v", ONGRID_DATA_DIR=str(data))
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"ongrid-skills: store: data dir {data} (env ONGRID_DATA_DIR), "
        f"database sqlite:///{data}/ongrid.db (default)\n"
    )
    relative = run_cli("audit", "verify", "--verbose", "--data-dir", "data", cwd=tmp_path)
    assert relative.returncode == 0, relative.stderr
    assert f"store: data dir {data} (flag --data-dir)" in relative.stderr
    quiet = run_cli("token", "list", ONGRID_DATA_DIR=str(data))
    assert "store:" not in quiet.stderr


def test_a_database_url_is_shown_with_its_password_masked(tmp_path: Path) -> None:
    url = "postgresql://ops:s3cr3t@127.0.0.1:1/ongrid?sslmode=disable"
    done = run_cli("token", "list", "-v", ONGRID_DATABASE_URL=url, ONGRID_DATA_DIR=str(tmp_path))
    assert (
        "database postgresql://ops:********@127.0.0.1:1/ongrid?sslmode=disable "
        "(env ONGRID_DATABASE_URL)"
    ) in done.stderr
    assert "s3cr3t" not in done.stdout + done.stderr


def test_a_data_dir_that_is_a_file_is_refused_by_every_command_that_uses_a_store(
    tmp_path: Path,
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a dir")
    expected = (
        f"ongrid-skills: data dir {afile} is not a directory (given with --data-dir): "
        "set --data-dir or ONGRID_DATA_DIR\n"
    )
    for argv in (*READERS, ["token", "create", "--init", "--role", "admin", "--name", "a"]):
        done = run_cli(*argv, "--data-dir", str(afile))
        assert (done.returncode, done.stderr) == (2, expected), argv
    assert afile.read_text() == "not a dir"


def test_a_data_dir_this_user_cannot_read_is_refused_with_its_path(
    world_readable_dir: Path,
) -> None:
    data = world_readable_dir / "data"
    data.mkdir(mode=0o700)  # root's: nobody may not enter it

    def audit_as_nobody() -> list[Any]:
        by_flag = CliRunner().invoke(cli, ["audit", "list", "--data-dir", str(data)])
        by_env = CliRunner().invoke(cli, ["token", "list"], env={"ONGRID_DATA_DIR": str(data)})
        return [[r.exit_code, r.stderr] for r in (by_flag, by_env)]

    by_flag, by_env = run_unprivileged(audit_as_nobody)
    unreadable = f"ongrid-skills: data dir {data} is not readable and writable by this user"
    assert by_flag == [
        2,
        f"{unreadable} (given with --data-dir): set --data-dir or ONGRID_DATA_DIR\n",
    ]
    assert by_env == [
        2,
        f"{unreadable} (set by ONGRID_DATA_DIR): set --data-dir or ONGRID_DATA_DIR\n",
    ]


def test_a_bad_value_in_the_config_file_names_the_file_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text('[ongrid]\ndefault_timeout_seconds = "soon"\n')
    done = run_cli("--config", str(config), "token", "list", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"ongrid-skills: {config}: default_timeout_seconds must be an integer, got 'soon'\n"
    )
    config.write_text("[ongrid]\ndata_dir = 5\n")
    typed = run_cli("--config", str(config), "audit", "list")
    assert typed.returncode == 2
    assert typed.stderr == f"ongrid-skills: {config}: data_dir must be a string, got 5\n"
    config.write_text("ongrid = 5\n")
    table = run_cli("--config", str(config), "list")
    assert table.returncode == 2 and "[ongrid] must be a table" in table.stderr
    from_env = run_cli("audit", "list", ONGRID_LOG_LEVEL="chatty")
    assert from_env.returncode == 2
    assert from_env.stderr.startswith("ongrid-skills: ONGRID_LOG_LEVEL: log_level must be one of")


def test_the_data_dir_of_a_config_file_is_where_the_commands_look(tmp_path: Path) -> None:
    data = tmp_path / "from-file"
    config = tmp_path / "ongrid.toml"
    config.write_text(f'[ongrid]\ndata_dir = "{data}"\n')
    done = run_cli("--config", str(config), "token", "list", cwd="/")
    assert done.returncode == 2
    assert f"no store in {data} (set in {config})" in done.stderr


def test_mcp_and_chat_refuse_to_create_the_default_data_dir(tmp_path: Path) -> None:
    for argv in (["mcp"], ["chat", "-m", "hello"]):
        done = run_cli(*argv, cwd=tmp_path, stdin="")
        assert done.returncode == 2, argv
        assert f"no store in {tmp_path / '.ongrid'}" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_data_dir_outside_the_current_directory_is_found_from_anywhere(tmp_path: Path) -> None:
    data = tmp_path / "data"
    created_token(data, "--data-dir", str(data))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli("token", "list", "--json", cwd=elsewhere, ONGRID_DATA_DIR=str(data))
    assert done.returncode == 0 and '"ada"' in done.stdout
    assert os.listdir(elsewhere) == []
