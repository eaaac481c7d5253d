"""Token names are identities: one person gets one name, and no token passes for the product.

Through the CLI (`token create` on a data dir) and the REST API (the name a request is recorded
under, in the execution and in the audit log).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ongrid_skills.doors.cli.main import cli
from tests.support.agent import make_settings
from tests.support.server import Server, running_app
from tests.support.skills import MakeSkill

TOKEN_PREFIX = "ogs_"


def token_cli(data: Path, *args: str) -> Result:
    env = {"ONGRID_DATA_DIR": str(data), "ONGRID_URL": None, "ONGRID_TOKEN": None}
    return CliRunner().invoke(cli, ["token", *args], env=env, catch_exceptions=False)


def create(data: Path, name: str, role: str = "admin") -> Result:
    return token_cli(data, "create", "--init", "--role", role, "--name", name)


def listed_names(data: Path) -> list[str]:
    result = token_cli(data, "list", "--json")
    assert result.exit_code == 0, result.output
    return [row["name"] for row in json.loads(result.stdout)]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_token_create_stores_the_folded_name(data: Path) -> None:
    result = create(data, "Ａｄａ")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(TOKEN_PREFIX)
    assert listed_names(data) == ["ada"]


@pytest.mark.parametrize("again", ["ada", "ADA", "Ａｄａ", " Ada"])
def test_token_create_refuses_a_second_identity_for_the_same_person(data: Path, again: str) -> None:
    assert create(data, "Ada").exit_code == 0

    result = create(data, again)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "already named 'ada'" in result.stderr
    assert listed_names(data) == ["ada"]


@pytest.mark.parametrize("name", ["ada\u200b", "a\u200dda", "\u0430da", "a\u00a0da"])
def test_token_create_refuses_invisible_and_look_alike_characters(data: Path, name: str) -> None:
    assert create(data, "Ada").exit_code == 0

    result = create(data, name)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "is not allowed" in result.stderr
    assert json.dumps(name) in result.stderr  # the invisible character is shown escaped
    assert listed_names(data) == ["ada"]


@pytest.mark.parametrize("name", ["manager", "MANAGER", "watch", "system", "cli", "mcp"])
def test_token_create_refuses_names_the_product_uses_itself(data: Path, name: str) -> None:
    result = create(data, name)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "is reserved" in result.stderr
    assert "ada" not in listed_names(data)
    assert name.lower() not in listed_names(data)


def test_token_revoke_takes_the_name_as_typed(data: Path) -> None:
    assert create(data, "Ada").exit_code == 0
    result = token_cli(data, "revoke", "ADA")
    assert result.exit_code == 0, result.output
    assert create(data, "ada").exit_code == 0  # a revoked name may be given to a new token


# ---- the identity a request is recorded under ------------------------------------------------
@pytest.fixture
def server(tmp_path: Path, skills_root: Path, make_skill: MakeSkill) -> Iterator[Server]:
    make_skill("set_flag", "#!/bin/sh\ncat\n", **{"class": "mutating"})
    settings = make_settings(tmp_path, skills_root)
    created = create(Path(settings.data_dir), "Ａｄａ", "operator")
    assert created.exit_code == 0, created.output
    with running_app(settings) as app:
        app.tokens["ada"] = created.stdout.strip()
        yield app


def test_a_request_is_recorded_under_the_normalised_name(server: Server) -> None:
    response = server.call(
        "POST", "/v1/skills/set_flag/execute", "ada", json={"args": {}, "confirm": True}
    )
    assert response.status_code == 200, response.text
    assert response.json()["requested_by"] == "ada"
    entries = server.call("GET", "/v1/audit?action=execution.started", "admin").json()["items"]
    assert [e["actor"] for e in entries] == ["ada"]


def test_a_person_holding_one_identity_cannot_sign_their_own_request_under_another(
    server: Server,
) -> None:
    pending = server.call("POST", "/v1/skills/set_flag/execute", "ada", json={"args": {}})
    assert pending.status_code == 202, pending.text
    second = create(Path(server.settings.data_dir), "ADA", "operator")
    assert second.exit_code == 2
    assert "already named 'ada'" in second.stderr

    approval_id = pending.json()["approval_id"]
    response = server.call("POST", f"/v1/approvals/{approval_id}/approve", "ada")
    assert response.status_code == 403
