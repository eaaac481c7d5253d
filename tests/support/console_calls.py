"""Calls a test makes to a served console's other doors: a request over REST, a look at an
execution over the MCP HTTP door."""

from __future__ import annotations

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.browser import Console
from tests.support.waiting import wait_for


def request(console: Console, skill: str, who: str = "olga") -> str:
    """Ask for ``skill`` (no args) as ``who``; the call must wait for approval: its request id."""
    response = console.rest("POST", f"/v1/skills/{skill}/execute", who, json={"args": {}})
    assert response.status_code == 202, response.text
    approval_id: str = response.json()["approval_id"]
    return approval_id


def mcp_execution(console: Console, execution_id: str, who: str = "olga") -> types.CallToolResult:
    """``get_execution`` of ``execution_id`` over the MCP HTTP door, as ``who``."""

    async def call() -> types.CallToolResult:
        headers = {"Authorization": f"Bearer {console.tokens[who]}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30)) as http,
            streamable_http_client(console.url + "/mcp", http_client=http) as (read, write, *_),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return await client.call_tool("get_execution", {"id": execution_id})

    return anyio.run(call)


def run_request(console: Console, persona: str, message: str, who: str = "olga") -> tuple[str, str]:
    """Start an agent run as ``who``; wait for the approval request its first call makes:
    ``(run id, request id)``."""
    started = console.rest(
        "POST", "/v1/agent/runs", who, json={"persona": persona, "message": message}
    )
    assert started.status_code == 202, started.text
    run_id: str = started.json()["id"]

    def asked() -> str | None:
        items = console.rest("GET", "/v1/approvals?status=pending", "vera").json()["items"]
        mine = [a["id"] for a in items if a["requested_by"] == f"agent:{run_id}"]
        return str(mine[0]) if mine else None

    return run_id, wait_for(asked, "the run's request")
