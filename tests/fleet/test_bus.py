"""Connecting to NATS as the settings say (credentials, NKey seed, TLS files), and host ids."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

import nkeys
import pytest

from ongrid_skills.errors import ConfigError
from ongrid_skills.fleet.bus import Names, connect, connect_options, host_id_problem
from ongrid_skills.settings import Settings
from tests.support.fleet import fleet_on, host_skill
from tests.support.nats import running_nats
from tests.support.server import running_app
from tests.support.waiting import wait_for


def test_servers_are_a_comma_separated_list_and_reconnection_never_gives_up() -> None:
    options = connect_options(Settings(nats_url="nats://a:4222, tls://b:4222"), "x")
    assert options["servers"] == ["nats://a:4222", "tls://b:4222"]
    assert options["allow_reconnect"] is True


def test_a_fleet_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="ONGRID_NATS_URL is not set"):
        connect_options(Settings(), "x")


@pytest.mark.parametrize(
    ("setting", "env"),
    [("nats_creds", "ONGRID_NATS_CREDS"), ("nats_nkey_seed", "ONGRID_NATS_NKEY_SEED")],
)
def test_a_credentials_or_seed_file_that_cannot_be_read_is_named(
    tmp_path: Path, setting: str, env: str
) -> None:
    missing = str(tmp_path / "nope")
    settings = Settings(nats_url="nats://a", **{setting: missing})
    with pytest.raises(ConfigError, match=f"{env}: cannot read {missing}"):
        connect_options(settings, "x")


def test_tls_files_make_a_context_and_a_certificate_needs_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="NATS TLS files"):
        connect_options(Settings(nats_url="tls://a", nats_tls_ca=str(tmp_path / "ca")), "x")
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    with pytest.raises(ConfigError, match="needs ONGRID_NATS_TLS_KEY"):
        connect_options(Settings(nats_url="tls://a", nats_tls_cert=str(cert)), "x")
    ca = Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
    options = connect_options(Settings(nats_url="tls://a", nats_tls_ca=str(ca)), "x")
    assert isinstance(options["tls"], ssl.SSLContext)


@pytest.mark.parametrize("host", ["web-1", "web_1.example.com", "A1"])
def test_host_ids_are_dot_separated_labels(host: str) -> None:
    assert host_id_problem(host) is None


@pytest.mark.parametrize("host", ["", "a b", "a..b", ".a", "a.", "a*", "a>", "x" * 129])
def test_host_ids_that_would_break_a_subject_are_refused(host: str) -> None:
    assert host_id_problem(host) is not None


def test_names_derive_from_the_prefix_and_consumers_hold_no_dots() -> None:
    names = Names("ops")
    assert (names.hosts_bucket, names.calls_stream, names.events_stream) == (
        "ops-hosts",
        "ops-calls",
        "ops-events",
    )
    assert names.call_subject("web.1") == "ops.call.web.1"
    assert "." not in names.worker_consumer("web.1")


def test_a_worker_and_a_manager_authenticate_with_an_nkey_seed(
    tmp_path: Path, skills_root: Path
) -> None:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed + b"\n")
    config = f'authorization {{ users = [ {{ nkey: "{public}" }} ] }}\n'
    skills = tmp_path / "worker-skills"
    host_skill(skills, "where_am_i", "echo '{\"here\": true}'")
    with running_nats(config) as server, fleet_on(tmp_path, server, "nk") as fleet:
        fleet.worker("alpha", skills, ONGRID_NATS_NKEY_SEED=str(seed_file))
        settings = fleet.manager_settings(skills_root, nats_nkey_seed=str(seed_file))
        with running_app(settings) as manager:

            def offered() -> bool:
                response = manager.call("GET", "/v1/skills/where_am_i", "vera")
                return response.status_code == 200

            wait_for(offered, "the host skill over the authenticated bus")
            done = manager.call(
                "POST", "/v1/skills/where_am_i/execute", "olga", json={"args": {"host": "alpha"}}
            ).json()
            assert done["status"] == "succeeded" and done["result"] == {"here": True}
        # Without the seed, the server refuses the manager: it does not start.
        with pytest.raises(ConfigError, match="cannot connect to NATS"):
            asyncio.run(connect(fleet.manager_settings(skills_root), "x", first_attempts=1))
