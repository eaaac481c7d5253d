"""Bearer-token authentication of the REST door: revoked, unknown and malformed tokens."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.server import Server
from tests.support.waiting import wait_for


def test_a_revoked_token_is_refused_by_the_api(server: Server) -> None:
    assert server.call("GET", "/v1/skills", "olga").status_code == 200
    assert server.store.tokens.revoke("olga")
    server.client.app.state.auth.forget()  # type: ignore[attr-defined]  # skip the 2 s cache

    response = server.call("GET", "/v1/skills", "olga")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert server.call("GET", "/v1/skills", "oscar").status_code == 200


def test_a_revoked_token_stops_working_within_the_auth_cache_time(server: Server) -> None:
    auth = server.client.app.state.auth  # type: ignore[attr-defined]
    auth.cache_seconds = 0.2
    assert server.call("GET", "/v1/skills", "vera").status_code == 200
    assert server.store.tokens.revoke("vera")

    wait_for(
        lambda: server.call("GET", "/v1/skills", "vera").status_code == 401,
        "the revoked token to be refused",
        timeout=5,
    )


@pytest.mark.parametrize(
    "header",
    [None, "Bearer ", "Bearer ogs_not-a-token", "Basic YWRtaW46YWRtaW4=", "ogs_x"],
    ids=["missing", "empty", "unknown", "basic", "no-scheme"],
)
def test_calls_without_a_valid_token_are_unauthorized(server: Server, header: str | None) -> None:
    headers: dict[str, Any] = {"Authorization": header} if header is not None else {}
    response = server.client.get("/v1/executions", headers=headers)
    assert server.client.get("/v1/health").status_code == 200

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"
