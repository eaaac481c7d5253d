"""What only the HTTP door has: bearer tokens, sessions bound to their token, the token's role."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from tests.support.mcp import SAFE, World, envelope, session

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
STREAMS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(world: World, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(
        world.serve.url + "/mcp", json=body, headers={**STREAMS, **headers}, timeout=30
    )


def test_mcp_over_http_refuses_a_missing_or_bad_bearer_token(world: World) -> None:
    for authorization in ({}, {"Authorization": "Bearer ogs_not_a_token"}, {"Authorization": "x"}):
        response = post(world, INITIALIZE, **authorization)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"

    async def scenario() -> None:
        async with session(world, "http", token="ogs_not_a_token"):
            pytest.fail("initialized with a bad token")  # pragma: no cover

    with pytest.raises(BaseException) as caught:  # an ExceptionGroup around the MCPError
        anyio.run(scenario)
    assert "error response" in repr(caught.value)


def test_an_http_session_belongs_to_the_token_that_opened_it(world: World) -> None:
    olga = {"Authorization": f"Bearer {world.tokens['olga']}"}
    oscar = {"Authorization": f"Bearer {world.tokens['oscar']}"}
    opened = post(world, INITIALIZE, **olga)
    assert opened.status_code == 200
    sid = opened.headers["mcp-session-id"]
    ids = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert post(world, listing, **oscar, **ids).status_code == 404  # as if it did not exist
    own = post(world, listing, **olga, **ids)
    assert own.status_code == 200 and '"verbatim"' in own.text
    httpx.delete(world.serve.url + "/mcp", headers={**olga, **ids}, timeout=30)


def test_the_token_role_narrows_what_the_persona_offers(world: World) -> None:
    async def scenario() -> None:
        async with session(world, "http", persona="root", token="vera") as client:  # a viewer
            listing = await client.list_tools()
            assert [t.name for t in listing.tools] == [*SAFE, "get_execution"]
            refused = envelope(await client.call_tool("mutate", {}))
            assert refused["error"]["code"] == "denied"
            assert "viewer" in refused["error"]["message"]

    anyio.run(scenario)


def test_an_unknown_persona_is_refused_on_http(world: World) -> None:
    async def scenario() -> None:
        async with session(world, "http", persona="nobody") as client:
            with pytest.raises(Exception, match="unknown persona 'nobody'"):
                await client.list_tools()

    anyio.run(scenario)


def test_an_mcp_http_body_naming_a_key_twice_is_refused_before_the_sdk_reads_it(
    world: World,
) -> None:
    olga = {"Authorization": f"Bearer {world.tokens['olga']}"}
    opened = post(world, INITIALIZE, **olga)
    assert opened.status_code == 200
    ids = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    before = len(world.audit("execution.started"))
    # Which tool would run? The SDK keeps the last "name"; a reader of the first sees "verbatim".
    body = (
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call",'
        b' "params": {"name": "verbatim", "arguments": {}, "\\u006eame": "fails"}}'
    )
    response = httpx.post(
        world.serve.url + "/mcp", content=body, headers={**STREAMS, **olga, **ids}, timeout=30
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert 'duplicate key "name" at $.params.name' in error["message"]
    assert len(world.audit("execution.started")) == before
    httpx.delete(world.serve.url + "/mcp", headers={**olga, **ids}, timeout=30)
