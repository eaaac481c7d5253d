"""A call's end is shown to its followers (MCP, the console's live view) only once committed."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from ongrid_skills.execution.records import Execution
from ongrid_skills.manager import Manager
from ongrid_skills.runtime import open_manager
from tests.support.agent import OLGA, make_settings
from tests.support.skills import MakeSkill
from tests.support.waiting import until

# Waits for a file named ``go`` in its folder, then answers.
WAITS_FOR_GO = (
    "#!/bin/sh\ncat >/dev/null\nwhile [ ! -e go ]; do sleep 0.01; done\necho '{\"ok\": 1}'\n"
)


def stored_status(data_dir: Path, execution_id: str) -> str:
    """What another process reads: a plain connection, no flush of the manager's queue."""
    with sqlite3.connect(data_dir / "ongrid.db") as conn:
        row = conn.execute("SELECT status FROM executions WHERE id = ?", (execution_id,)).fetchone()
    return str(row[0])


async def followed_call(manager: Manager) -> tuple[Execution, asyncio.Task[None]]:
    """Start the skill ``waits`` and follow its timeline to the end in a task, as MCP does."""
    execution = await manager.submit("waits", {}, principal=OLGA, wait=False)
    timeline = manager.hub.get(execution.id)
    assert timeline is not None

    async def follow() -> None:
        async for _seq, _event in timeline.follow():
            pass

    return execution, asyncio.create_task(follow())


def test_a_followed_call_ends_for_its_follower_only_once_its_outcome_is_committed(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    folder = make_skill("waits", WAITS_FOR_GO)
    settings = make_settings(tmp_path, skills_root)
    data_dir = Path(settings.data_dir)

    async def scenario() -> None:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            execution, follower = await followed_call(manager)
            held, release = threading.Event(), threading.Event()

            def other_writer() -> None:  # holds the database's write lock meanwhile
                with manager.store.db.tx():
                    held.set()
                    release.wait(10)

            thread = threading.Thread(target=other_writer)
            thread.start()
            try:
                assert await asyncio.to_thread(held.wait, 10)
                (folder / "go").touch()
                await until(lambda: manager.store.db.group.pending == 1, what="the outcome queued")
                assert execution.status.final
                for _ in range(5):  # give the follower every chance to run
                    await asyncio.sleep(0)
                # Its outcome waits for the lock: the follower must not have been told yet.
                assert stored_status(data_dir, execution.id) == "running"
                assert not follower.done()
            finally:
                release.set()
                await asyncio.to_thread(thread.join, 10)
            await asyncio.wait_for(follower, 10)
            assert stored_status(data_dir, execution.id) == "succeeded"

    asyncio.run(scenario())


def test_a_call_ending_after_the_store_closed_still_ends_for_its_follower(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    folder = make_skill("waits", WAITS_FOR_GO)
    settings = make_settings(tmp_path, skills_root)

    async def scenario() -> None:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            execution, follower = await followed_call(manager)
            manager.store.db.group.close()  # its outcome can no longer be recorded
            (folder / "go").touch()
            await asyncio.wait_for(follower, 10)  # told the call ended all the same
            assert execution.status.final

    asyncio.run(scenario())
