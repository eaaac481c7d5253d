"""``?id_prefix=`` on the execution and approval listings: how a short id is resolved."""

from __future__ import annotations

import pytest

from tests.support.server import Server
from tests.support.skills import MakeSkill


@pytest.fixture
def server_skills(make_skill: MakeSkill) -> None:
    make_skill("echo")
    make_skill("disk_clean", **{"class": "mutating"})


def test_executions_filtered_by_an_id_prefix(server: Server) -> None:
    runs = [server.call("POST", "/v1/skills/echo/execute", "olga", json={}) for _ in range(3)]
    ids = [run.json()["id"] for run in runs]
    for ident in ids:
        answer = server.call("GET", "/v1/executions", "vera", params={"id_prefix": ident[:6]})
        assert answer.status_code == 200
        assert ident in [e["id"] for e in answer.json()["items"]]
        assert all(e["id"].startswith(ident[:6]) for e in answer.json()["items"])
        upper = server.call("GET", "/v1/executions", "vera", params={"id_prefix": ident.upper()})
        assert [e["id"] for e in upper.json()["items"]] == [ident]


def test_approvals_filtered_by_an_id_prefix_of_any_status(server: Server) -> None:
    pending = server.call("POST", "/v1/skills/disk_clean/execute", "olga", json={}).json()
    rejected = server.call("POST", "/v1/skills/disk_clean/execute", "olga", json={}).json()
    server.call("POST", f"/v1/approvals/{rejected['approval_id']}/reject", "oscar")
    for execution, status in ((pending, "pending"), (rejected, "rejected")):
        approval_id = execution["approval_id"]
        answer = server.call("GET", "/v1/approvals", "vera", params={"id_prefix": approval_id})
        assert [(a["id"], a["status"]) for a in answer.json()["items"]] == [(approval_id, status)]


@pytest.mark.parametrize("prefix", ["", "xyz", "ab%", "a" * 33, "0x12"])
def test_an_id_prefix_that_is_not_hex_digits_is_a_400(server: Server, prefix: str) -> None:
    for path in ("/v1/executions", "/v1/approvals"):
        answer = server.call("GET", path, "vera", params={"id_prefix": prefix})
        assert answer.status_code == 400, (path, prefix, answer.text)
        assert answer.json()["error"]["code"] == "invalid_request"
