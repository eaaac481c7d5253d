"""Clients of the 2026-07-28 protocol (the SDK's high-level ``Client`` negotiates it by default):
no server-to-client requests, so the confirmation is an input-required round trip whose signed
``request_state`` binds the answer to this call; tool list changes come on subscriptions/listen."""

from __future__ import annotations

import json
import shutil
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tests.support.mcp import (
    VERBATIM,
    Seen,
    World,
    answering,
    envelope,
    modern_client,
    sighup_mcp_servers,
    text,
)
from tests.support.skills import write_skill
from tests.support.waiting import until

ACCEPT = types.ElicitResult(action="accept", content={"confirm": True})


def test_a_2026_client_confirms_by_round_trip_and_gets_logs_it_opted_in_to(
    world: World, transport: str
) -> None:
    async def scenario() -> None:
        seen = Seen()
        async with modern_client(
            world, transport, persona="ops", elicit=answering(seen, ACCEPT), seen=seen
        ) as client:
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("mutate", {"era": f"2026-{transport}"})
            assert json.loads(text(result)) == {"mutated": True}
            assert len(seen.elicitations) == 1
            failed = envelope(await client.call_tool("fails", {}))
            assert failed["exit_code"] == 3
            assert [log.data for log in seen.logs] == ["boom"]

    anyio.run(scenario)


def test_a_round_trip_confirmation_holds_for_one_call_with_those_args_only(
    world: World, transport: str
) -> None:
    """Driven by hand (``allow_input_required``): a signed answer cannot be reused, nor moved to
    other args."""
    accept: dict[str, types.InputResponse] = {"confirm": ACCEPT}
    decline: dict[str, types.InputResponse] = {"confirm": types.ElicitResult(action="decline")}

    async def ask(session: ClientSession, args: dict[str, Any]) -> str:
        asked = await session.call_tool("mutate", args, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        assert asked.input_requests is not None and "confirm" in asked.input_requests
        assert asked.request_state is not None
        return asked.request_state

    async def scenario() -> None:
        elicit = answering(Seen(), ACCEPT)  # advertises elicitation; never called by hand
        async with modern_client(world, transport, persona="ops", elicit=elicit) as client:
            session = client.session
            state = await ask(session, {"n": 1})
            with pytest.raises(MCPError, match="not for this call"):  # other args
                await session.call_tool(
                    "mutate", {"n": 2}, input_responses=accept, request_state=state
                )
            done = await session.call_tool(
                "mutate", {"n": 1}, input_responses=accept, request_state=state
            )
            assert json.loads(text(done)) == {"mutated": True}
            with pytest.raises(MCPError, match="not for this call"):  # used already
                await session.call_tool(
                    "mutate", {"n": 1}, input_responses=accept, request_state=state
                )
            state = await ask(session, {"n": 3})
            declined = await session.call_tool(
                "mutate", {"n": 3}, input_responses=decline, request_state=state
            )
            assert envelope(declined)["error"]["code"] == "rejected"

    anyio.run(scenario)


def test_a_2026_client_hears_of_tool_list_changes_on_its_listen_stream(
    world: World, transport: str
) -> None:
    def reload() -> None:
        if transport == "http":
            assert world.rest("POST", "/v1/reload").status_code == 200
            return
        before = len(world.audit("registry.reloaded"))
        sighup_mcp_servers()
        anyio.run(until, lambda: len(world.audit("registry.reloaded")) > before)

    async def scenario() -> None:
        async with modern_client(world, transport) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                write_skill(world.extra, "later_listed", VERBATIM)
                await anyio.to_thread.run_sync(reload)
                with anyio.fail_after(10):
                    event = await subscription.__anext__()
                assert type(event).__name__ == "ToolsListChanged"
            listing = await client.list_tools()
            assert "later_listed" in [tool.name for tool in listing.tools]

    try:
        anyio.run(scenario)
    finally:
        for child in world.extra.iterdir():
            shutil.rmtree(child)
        if transport == "http":
            world.rest("POST", "/v1/reload")
