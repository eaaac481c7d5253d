"""The MCP door over both transports, with the official MCP client: a fresh `ongrid-skills mcp`
subprocess on stdio, or streamable HTTP against the real `serve` (bearer token of olga, an
operator). Both share one data dir, so approvals granted over REST reach stdio calls too."""

from __future__ import annotations

import getpass
import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.support.mcp import (
    MUTATE,
    SAFE,
    VERBATIM,
    Seen,
    World,
    answering,
    envelope,
    session,
    sighup_mcp_servers,
    text,
)
from tests.support.processes import alive
from tests.support.skills import write_skill
from tests.support.waiting import until


def requester(transport: str) -> str:
    """Who the door says is calling: the local human on stdio, the token's name on HTTP."""
    return f"mcp:{getpass.getuser()}" if transport == "stdio" else "olga"


def names(listing: types.ListToolsResult) -> list[str]:
    return [tool.name for tool in listing.tools]


def tool_dicts(listing: types.ListToolsResult) -> dict[str, dict[str, Any]]:
    return {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in listing.tools}


def test_tools_list_is_the_persona_offer_with_class_annotations(
    world: World, transport: str
) -> None:
    async def scenario() -> None:
        async with session(world, transport) as client:  # no persona: read-only `default`
            listing = await client.list_tools()
            assert names(listing) == [*SAFE, "get_execution"]
            denied = await client.call_tool("mutate", {})  # not offered, not runnable either
            assert envelope(denied)["error"]["code"] == "denied"
        for persona, extra in (("ops", ["mutate"]), ("root", ["mutate", "nuke"])):
            async with session(world, transport, persona=persona) as client:
                listing = await client.list_tools()
                assert names(listing) == [*sorted([*SAFE, *extra]), "get_execution"]
                tools = tool_dicts(listing)
                export = world.rest("GET", f"/v1/personas/{persona}/tools?format=mcp").json()
                for exported in export["tools"]:  # the same function as the tool export
                    assert tools[exported["name"]] == exported
        safe, mutating = tools["verbatim"]["annotations"], tools["mutate"]["annotations"]
        dangerous = tools["nuke"]["annotations"]
        assert (safe["readOnlyHint"], safe["destructiveHint"], safe["idempotentHint"]) == (
            True,
            False,
            False,
        )
        assert (mutating["readOnlyHint"], mutating["destructiveHint"]) == (False, False)
        assert (dangerous["readOnlyHint"], dangerous["destructiveHint"]) == (False, True)
        assert tools["strict"]["title"] == "strict"
        assert tools["strict"]["inputSchema"]["required"] == ["name", "count"]
        assert "outputSchema" not in tools["verbatim"]
        assert tools["get_execution"]["inputSchema"]["required"] == ["id"]

    anyio.run(scenario)


def test_calls_answer_with_the_verbatim_stdout_or_the_error_envelope(
    world: World, transport: str
) -> None:
    async def scenario() -> None:
        async with session(world, transport) as client:
            ok = await client.call_tool("verbatim", {})
            assert not ok.is_error
            assert text(ok) == '{"b": 1,   "a": [1, 2]}'  # the bytes the skill wrote
            assert ok.structured_content == {"b": 1, "a": [1, 2]}

            array = await client.call_tool("listing", {})
            assert text(array) == "[1, 2, 3]"
            assert array.structured_content is None  # only an object is structured content

            failed = envelope(await client.call_tool("fails", {}))
            assert failed["error"]["code"] == "exit_status"
            assert failed["exit_code"] == 3
            assert "boom" in failed["stderr_tail"]

            invalid = envelope(await client.call_tool("strict", {"count": 0, "color": "red"}))
            assert invalid["error"]["code"] == "invalid_args"
            pointers = sorted(d["pointer"] for d in invalid["error"]["details"])
            assert pointers == ["", "", "/count"]  # name missing, color not allowed, count < 1

            late = envelope(await client.call_tool("slow", {}))
            assert late["error"]["code"] == "timed_out"

            with pytest.raises(MCPError, match="Unknown tool: nope"):
                await client.call_tool("nope", {})
            with pytest.raises(MCPError) as refused:  # the loader's reason, not just "unknown"
                await client.call_tool("noexec", {})
            assert str(refused.value).startswith(
                f"Unknown tool: noexec: it failed to load: entry {world.root}/noexec/run is not "
                "executable"
            )

    anyio.run(scenario)


def test_stderr_lines_and_progress_reach_the_client_while_the_skill_runs(
    world: World, transport: str, tmp_path: Path
) -> None:
    """The skill blocks after each of its stderr and progress lines until the client has
    received the matching notification, so the call ends only if both arrived before it."""
    gates = tmp_path / "gates"
    gates.mkdir()
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))
        (gates / "seen-progress").touch()

    async def scenario() -> None:
        seen = Seen()
        async with session(world, transport, seen=seen) as client:
            async with anyio.create_task_group() as tg:

                async def release_on_log() -> None:
                    await until(lambda: any(log.data == "first line" for log in seen.logs))
                    (gates / "seen-log").touch()

                tg.start_soon(release_on_log)
                result = await client.call_tool(
                    "talker", {"dir": str(gates)}, progress_callback=on_progress
                )
            assert not result.is_error, text(result)
            assert json.loads(text(result)) == {"done": True}
            first = next(log for log in seen.logs if log.data == "first line")
            assert (first.level, first.logger) == ("info", "talker")
            assert progress == [(1.0, 2.0, "half way")]

    anyio.run(scenario)


def test_an_accepted_elicitation_is_the_confirmation_and_runs_the_call(
    world: World, transport: str
) -> None:
    args = {"target": f"db-{transport}", "replicas": 2}

    async def scenario() -> None:
        seen = Seen()
        accept = answering(seen, types.ElicitResult(action="accept", content={"confirm": True}))
        async with session(world, transport, persona="ops", elicit=accept) as client:
            result = await client.call_tool("mutate", args)
        assert not result.is_error, text(result)
        assert json.loads(text(result)) == {"mutated": True}
        (asked,) = seen.elicitations
        assert isinstance(asked, types.ElicitRequestFormParams)
        assert "mutate" in asked.message and "mutating" in asked.message
        assert json.dumps(args, indent=2) in asked.message  # the exact args
        assert asked.requested_schema["properties"]["confirm"]["type"] == "boolean"

    anyio.run(scenario)
    confirmed = [e for e in world.audit("execution.confirmed") if e["data"]["args"] == args]
    assert [e["actor"] for e in confirmed] == [requester(transport)]
    assert confirmed[0]["data"]["via"] == "mcp elicitation"


def test_a_declined_elicitation_is_a_recorded_rejection(world: World, transport: str) -> None:
    args = {"target": f"declined-{transport}"}

    async def scenario() -> dict[str, Any]:
        seen = Seen()
        decline = answering(seen, types.ElicitResult(action="decline"))
        async with session(world, transport, persona="ops", elicit=decline) as client:
            result = await client.call_tool("mutate", args)
        assert len(seen.elicitations) == 1
        return envelope(result)

    body = anyio.run(scenario)
    assert body["error"] == {"code": "rejected", "message": "declined in the MCP client"}
    requested = [e for e in world.audit("approval.requested") if e["data"]["args"] == args]
    assert len(requested) == 1
    rejected = [
        e for e in world.audit("approval.rejected") if e["subject"] == requested[0]["subject"]
    ]
    assert [(e["actor"], e["data"]["reason"]) for e in rejected] == [
        (requester(transport), "declined in the MCP client")
    ]


def test_without_elicitation_a_mutating_call_waits_for_approval_then_get_execution_follows_up(
    world: World, transport: str
) -> None:
    async def scenario() -> None:
        async with session(world, transport, persona="ops") as client:  # no elicitation support
            pending = await client.call_tool("mutate", {"step": transport})
            assert not pending.is_error
            body = json.loads(text(pending))
            assert body["status"] == "pending_approval"
            approval_id = body["approval_id"]
            structured = pending.structured_content or {}
            execution_id = structured["execution_id"]
            assert structured["signatures_required"] == 1
            assert f"ongrid-skills approvals approve {approval_id}" in text(pending, 1)
            assert f"POST /v1/approvals/{approval_id}/approve" in text(pending, 1)

            waiting = await client.call_tool("get_execution", {"id": execution_id})
            assert json.loads(text(waiting))["status"] == "pending_approval"

            approved = await anyio.to_thread.run_sync(
                lambda: world.rest("POST", f"/v1/approvals/{approval_id}/approve", who="oscar")
            )
            assert approved.status_code == 200, approved.text

            done = await client.call_tool("get_execution", {"id": execution_id, "wait_seconds": 20})
            assert not done.is_error, text(done)
            assert json.loads(text(done)) == {"mutated": True}
            by_approval = await client.call_tool("get_execution", {"id": approval_id})
            assert json.loads(text(by_approval)) == {"mutated": True}

            unknown = envelope(await client.call_tool("get_execution", {"id": "nope"}))
            assert unknown["error"]["code"] == "not_found"
            bad = envelope(await client.call_tool("get_execution", {"wait_seconds": 99}))
            assert bad["error"]["code"] == "invalid_args"

    anyio.run(scenario)


def test_dangerous_calls_never_elicit_and_wait_for_two_signers(
    world: World, transport: str
) -> None:
    async def scenario() -> None:
        seen = Seen()
        accept = answering(seen, types.ElicitResult(action="accept", content={"confirm": True}))
        async with session(world, transport, persona="root", elicit=accept) as client:
            result = await client.call_tool("nuke", {})
        assert not result.is_error
        assert seen.elicitations == []
        structured = result.structured_content or {}
        assert structured["status"] == "pending_approval"
        assert structured["signatures_required"] == 2
        assert "2 distinct human signers" in text(result, 1)

    anyio.run(scenario)


def test_cancelling_a_call_kills_the_skill_process_group(
    world: World, transport: str, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()

    def started() -> bool:
        return all(
            (pids / f).exists() and (pids / f).read_text().strip()
            for f in ("child.pid", "grandchild.pid")
        )

    async def scenario() -> tuple[int, int]:
        async with session(world, transport) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "sleeper", {"dir": str(pids)})
                await until(started)
                tg.cancel_scope.cancel()  # the client sends notifications/cancelled
            child = int((pids / "child.pid").read_text())
            grandchild = int((pids / "grandchild.pid").read_text())
            await until(lambda: not alive(child) and not alive(grandchild))
            return child, grandchild

    anyio.run(scenario)
    latest = world.rest("GET", "/v1/executions", params={"skill": "sleeper", "limit": 1}).json()
    assert latest["items"][0]["status"] == "cancelled"


def test_tools_list_changed_is_sent_after_a_reload_that_changes_the_offer(
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
        seen = Seen()
        async with session(world, transport, seen=seen) as client:  # read-only `default`
            assert "later_probe" not in names(await client.list_tools())
            # Not offered to a read-only persona: nothing changes for this client.
            write_skill(world.extra, "later_mutation", MUTATE, **{"class": "mutating"})
            await anyio.to_thread.run_sync(reload)
            await client.list_tools()  # a round trip after the reload
            assert seen.count(types.ToolListChangedNotification) == 0
            # A new safe tool changes the offer.
            write_skill(world.extra, "later_probe", VERBATIM)
            await anyio.to_thread.run_sync(reload)
            with anyio.fail_after(10):
                await seen.list_changed.wait()
            listing = names(await client.list_tools())
            assert "later_probe" in listing and "later_mutation" not in listing
            assert seen.count(types.ToolListChangedNotification) == 1

    try:
        anyio.run(scenario)
    finally:
        for child in world.extra.iterdir():
            shutil.rmtree(child)
        if transport == "http":
            world.rest("POST", "/v1/reload")
