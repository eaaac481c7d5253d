"""Settings: ONGRID_* variables over an optional TOML file; the dir lists and their separators."""

from __future__ import annotations

from pathlib import Path

import pytest

from ongrid_skills import ConfigError, Settings


@pytest.mark.parametrize(
    ("value", "dirs"),
    [
        ("/etc/ongrid/skills", ("/etc/ongrid/skills",)),
        ("/a:/b", ("/a", "/b")),
        ("/a,/b", ("/a", "/b")),
        ("  /a  :  /b  ,  /c  ", ("/a", "/b", "/c")),
        ("/a::,,/b:", ("/a", "/b")),
        (" : , ", ()),
        ("", ()),
        ("relative/dir:/abs", ("relative/dir", "/abs")),
    ],
)
def test_external_dirs_split_on_colon_and_comma_with_blanks_ignored_and_spaces_trimmed(
    value: str, dirs: tuple[str, ...]
) -> None:
    settings = Settings.load(environ={"ONGRID_SKILLS_EXTERNAL_DIRS": value})
    assert settings.external_dirs == dirs


def test_no_variables_and_no_file_give_the_defaults() -> None:
    settings = Settings.load(environ={})
    assert settings.external_dirs == ()
    assert settings.persona_dirs == ()
    assert settings.default_timeout_seconds == 30


def test_native_and_persona_dirs_use_the_same_separators() -> None:
    settings = Settings.load(
        environ={"ONGRID_SKILLS_NATIVE_DIRS": "/n1, /n2", "ONGRID_PERSONAS_DIRS": "/p1:/p2"}
    )
    assert settings.native_dirs == ("/n1", "/n2")
    assert settings.persona_dirs == ("/p1", "/p2")


def test_an_environment_variable_wins_over_the_toml_file(tmp_path: Path) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text(
        "[ongrid]\n"
        'external_dirs = ["/from/file/a", "/from/file/b"]\n'
        'persona_dirs = ["/from/file/personas"]\n'
        "default_timeout_seconds = 45\n"
    )
    from_file = Settings.load(environ={}, config=str(config))
    assert from_file.external_dirs == ("/from/file/a", "/from/file/b")
    assert from_file.default_timeout_seconds == 45
    env = {"ONGRID_SKILLS_EXTERNAL_DIRS": "/from/env", "ONGRID_DEFAULT_TIMEOUT_SECONDS": "12"}
    both = Settings.load(environ=env, config=str(config))
    assert both.external_dirs == ("/from/env",)
    assert both.default_timeout_seconds == 12
    assert both.persona_dirs == ("/from/file/personas",)  # not overridden: the file's value


def test_a_toml_file_may_give_the_dir_list_as_one_separated_string(tmp_path: Path) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text('external_dirs = "/a, /b:/c"\n')
    assert Settings.load(environ={}, config=str(config)).external_dirs == ("/a", "/b", "/c")


def test_a_broken_toml_file_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text("external_dirs = [\n")
    with pytest.raises(ConfigError):
        Settings.load(environ={}, config=str(config))


def test_a_non_integer_timeout_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        Settings.load(environ={"ONGRID_DEFAULT_TIMEOUT_SECONDS": "soon"})
