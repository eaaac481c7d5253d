"""The runtime: one reload watcher for every door, over every configured dir, audited ``watch``."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from fastapi.testclient import TestClient

from ongrid_skills.doors.asgi import create_app
from ongrid_skills.runtime import open_manager, reload_triggers
from ongrid_skills.settings import Settings
from ongrid_skills.skills.registry import Registry

DEADLINE = 20.0


def native_skill(root: Path, name: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Instructions about {name}.\n---\n# {name}\n"
    )


async def touch_until(event: asyncio.Event, path: Path) -> None:
    """Rewrite ``path`` until ``event`` is set (the watcher may start after the first write)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not event.is_set():
        assert loop.time() < deadline, "no reload before the deadline"
        path.write_text(path.read_text())
        try:
            await asyncio.wait_for(event.wait(), 1.0)
        except TimeoutError:
            continue


def settings_for(tmp_path: Path, native: Path) -> Settings:
    return Settings(native_dirs=(str(native),), data_dir=str(tmp_path / "data"))


def test_file_watching_reloads_on_a_new_skill_md_and_audits_the_reload_as_watch(
    tmp_path: Path,
) -> None:
    native = tmp_path / "native"
    native.mkdir()
    settings = settings_for(tmp_path, native)

    async def scenario() -> list[dict[str, object]]:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            seen = asyncio.Event()

            def listener(registry: Registry) -> None:
                if "runbook" in registry:
                    seen.set()

            manager.reload_listeners.append(listener)
            async with reload_triggers(manager, settings, watch_files=True):
                native_skill(native, "runbook")
                await touch_until(seen, native / "runbook" / "SKILL.md")
            return manager.store.audit.entries(action="registry.reloaded")

    entries = asyncio.run(scenario())
    assert entries, "the reload left no audit entry"
    assert entries[0]["actor"] == "watch"


def test_sighup_reloads_and_is_audited_as_the_signal(tmp_path: Path) -> None:
    native = tmp_path / "native"
    native.mkdir()
    settings = settings_for(tmp_path, native)

    async def scenario() -> list[dict[str, object]]:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            seen = asyncio.Event()
            manager.reload_listeners.append(lambda registry: seen.set())
            async with reload_triggers(manager, settings, watch_files=False):
                native_skill(native, "runbook")
                os.kill(os.getpid(), signal.SIGHUP)
                await asyncio.wait_for(seen.wait(), DEADLINE)
            assert "runbook" in manager.registry
            return manager.store.audit.entries(action="registry.reloaded")

    entries = asyncio.run(scenario())
    assert [e["actor"] for e in entries] == ["signal:SIGHUP"]


def test_the_served_app_with_watch_follows_native_skill_dirs(tmp_path: Path) -> None:
    native = tmp_path / "native"
    native.mkdir()
    app = create_app(settings_for(tmp_path, native), loader_sink=lambda _line: None, watch=True)
    with TestClient(app) as client:
        manager = app.state.manager
        seen = asyncio.Event()  # set and awaited on the app's own loop (the client's portal)

        def listener(registry: Registry) -> None:
            if "runbook" in registry:
                seen.set()

        manager.reload_listeners.append(listener)
        native_skill(native, "runbook")

        async def wait() -> None:
            await touch_until(seen, native / "runbook" / "SKILL.md")

        client.portal.call(wait)
        assert "runbook" in manager.registry
        entries = manager.store.audit.entries(action="registry.reloaded")
        assert entries[0]["actor"] == "watch"
