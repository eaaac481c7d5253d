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


@pytest.mark.parametrize("name", ["fleet_ttl_seconds", "replica_lease_ttl_seconds"])
def test_heartbeat_and_lease_ttls_are_whole_seconds_and_a_fraction_is_refused_saying_so(
    name: str, tmp_path: Path
) -> None:
    variable = "ONGRID_" + name.upper()
    assert getattr(Settings.load(environ={variable: "3"}), name) == 3
    with pytest.raises(ConfigError) as caught:
        Settings.load(environ={variable: "2.5"})
    assert caught.value.message == (
        f"{variable}: {name} must be a whole number of seconds (no fractions), got '2.5'"
    )
    config = tmp_path / "ongrid.toml"
    config.write_text(f"{name} = 2.5\n")  # a TOML float: never cut down to 2
    with pytest.raises(ConfigError) as from_file:
        Settings.load(environ={}, config=str(config))
    assert from_file.value.message.endswith(
        f"{name} must be a whole number of seconds (no fractions), got 2.5"
    )


def test_an_integer_setting_given_a_fractional_toml_number_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text("default_timeout_seconds = 2.5\n")
    with pytest.raises(ConfigError, match=r"default_timeout_seconds must be an integer, got 2\.5"):
        Settings.load(environ={}, config=str(config))
    config.write_text("default_timeout_seconds = 45.0\n")
    assert Settings.load(environ={}, config=str(config)).default_timeout_seconds == 45


# ---- approval notifications ----------------------------------------------------------------
SLACK = "https://hooks.slack.com/services/T000/B000/s3cr3tPathPart"


def test_approval_webhooks_split_on_commas_and_blanks_and_the_public_url_loses_its_slash() -> None:
    settings = Settings.load(
        environ={
            "ONGRID_APPROVAL_WEBHOOKS": f" {SLACK},http://127.0.0.1:9000/hook  https://mm.test/h ",
            "ONGRID_PUBLIC_URL": "https://ops.example.org/console/",
        }
    )
    assert settings.approval_webhooks == (
        SLACK,
        "http://127.0.0.1:9000/hook",
        "https://mm.test/h",
    )
    assert settings.public_url == "https://ops.example.org/console"


def test_without_settings_no_webhook_is_called_and_links_point_at_serves_default_address() -> None:
    settings = Settings.load(environ={"ONGRID_PUBLIC_URL": ""})
    assert settings.approval_webhooks == ()
    assert settings.public_url == "http://127.0.0.1:8731"


def test_approval_webhooks_come_from_the_toml_file_as_a_list_and_the_environment_wins(
    tmp_path: Path,
) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text(
        f'[ongrid]\napproval_webhooks = ["{SLACK}"]\npublic_url = "https://ops.example.org"\n'
    )
    assert Settings.load(environ={}, config=str(config)).approval_webhooks == (SLACK,)
    env = {"ONGRID_APPROVAL_WEBHOOKS": "http://127.0.0.1:1/x"}
    assert Settings.load(environ=env, config=str(config)).approval_webhooks == (
        "http://127.0.0.1:1/x",
    )
    off = Settings.load(environ={"ONGRID_APPROVAL_WEBHOOKS": ""}, config=str(config))
    assert off.approval_webhooks == ()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ftp://files.example/s3cr3tPathPart", "entry 1 must be an http or https URL"),
        ("hooks.slack.com/services/s3cr3tPathPart", "its scheme is 'none'"),
        (f"{SLACK} file:///etc/s3cr3tPathPart", "entry 2 must be an http or https URL"),
        ("https:///s3cr3tPathPart", "entry 1 must name a host"),
        ("https://hooks.example:99999/s3cr3tPathPart", "entry 1 is not a valid URL"),
        ("javascript:alert(1)//s3cr3tPathPart", "its scheme is 'javascript'"),
    ],
)
def test_a_webhook_that_is_not_an_http_url_is_a_config_error_that_never_repeats_the_url(
    value: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.load(environ={"ONGRID_APPROVAL_WEBHOOKS": value})
    assert message in str(caught.value)
    assert "s3cr3tPathPart" not in str(caught.value)


def test_a_webhook_list_in_the_toml_file_must_hold_strings(tmp_path: Path) -> None:
    config = tmp_path / "ongrid.toml"
    config.write_text("[ongrid]\napproval_webhooks = [1, 2]\n")
    with pytest.raises(ConfigError, match="list of http or https URLs"):
        Settings.load(environ={}, config=str(config))


@pytest.mark.parametrize(
    "value", ["ops.example.org", "ftp://ops.example.org", "https://ops.example.org/?a=1"]
)
def test_a_public_url_that_is_no_http_base_url_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="public_url"):
        Settings.load(environ={"ONGRID_PUBLIC_URL": value})


def test_the_settings_repr_never_shows_a_webhook_url() -> None:
    settings = Settings.load(environ={"ONGRID_APPROVAL_WEBHOOKS": SLACK})
    assert "s3cr3tPathPart" not in repr(settings)


@pytest.mark.parametrize(
    "url", ["http://a.example/\x00s3cr3tPathPart", "http://a.example/\ts3cr3t"]
)
def test_a_webhook_with_a_control_character_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="blank or a control character") as caught:
        Settings.load(environ={"ONGRID_APPROVAL_WEBHOOKS": url.replace("\t", "\x7f")})
    assert "s3cr3t" not in str(caught.value)


def test_no_proxy_is_trusted_by_default_and_the_list_takes_addresses_and_networks(
    tmp_path: Path,
) -> None:
    assert Settings.load(environ={}).trusted_proxies == ()
    listed = Settings.load(environ={"ONGRID_TRUSTED_PROXIES": " 127.0.0.1, 10.0.0.0/8  ::1 "})
    assert listed.trusted_proxies == ("127.0.0.1", "10.0.0.0/8", "::1")
    config = tmp_path / "ongrid.toml"
    config.write_text('[ongrid]\ntrusted_proxies = ["192.0.2.10", "fd00::/8"]\n')
    assert Settings.load(environ={}, config=str(config)).trusted_proxies == (
        "192.0.2.10",
        "fd00::/8",
    )


@pytest.mark.parametrize("value", ["proxy.example", "10.0.0.0/33", "127.0.0.1:8080", "*"])
def test_a_trusted_proxy_that_is_no_address_or_network_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="trusted_proxies") as caught:
        Settings.load(environ={"ONGRID_TRUSTED_PROXIES": f"127.0.0.1 {value}"})
    assert "is not an IP address or network" in str(caught.value)
