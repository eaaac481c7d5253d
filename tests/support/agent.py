"""The agent under test: settings and a child's environment aimed at the scripted LLM
(:mod:`tests.support.llm`), and one run driven in-process on a real manager and store, its
events read as every door reads them (``AgentService.follow``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ongrid_skills.agent import AgentRun, AgentService, RunRecord, to_event
from ongrid_skills.agent.loop import Confirm
from ongrid_skills.execution.records import Event
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.types import Role
from tests.support.llm import API_KEY, MODEL, FakeLLM, llm_settings
from tests.support.server import make_settings
from tests.support.store import migrated_data_dir

OLGA = Principal("olga", Role.OPERATOR)
OSCAR = Principal("oscar", Role.OPERATOR)


def agent_settings(tmp_path: Path, skills_root: Path, fake: FakeLLM, **overrides: Any) -> Settings:
    values: dict[str, Any] = llm_settings(fake, llm_timeout_seconds=30)
    values.update(overrides)
    return make_settings(tmp_path, skills_root, **values)


def llm_env(fake: FakeLLM, **extra: str) -> dict[str, str]:
    """The environment of a child process (CLI, serve) talking to the fake LLM."""
    return {
        "ONGRID_LLM_PROVIDER": fake.flavour,
        "ONGRID_LLM_BASE_URL": fake.url,
        "ONGRID_LLM_MODEL": MODEL,
        "ONGRID_LLM_API_KEY": API_KEY,
        "ONGRID_LLM_MAX_RETRIES": "0",
        **extra,
    }


@dataclass
class Outcome:
    record: RunRecord
    body: dict[str, Any]
    events: list[Event]

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def tool_messages(self) -> list[dict[str, Any]]:
        return [m for m in self.body["messages"] if m["role"] == "tool"]


During = Callable[[Manager, AgentService, AgentRun], Awaitable[None]]


def run_agent(
    settings: Settings,
    message: str,
    persona: str = "default",
    *,
    requester: Principal = OLGA,
    during: During | None = None,
    confirm: Confirm | None = None,
) -> Outcome:
    """One run to its end, in-process, on a real manager and store; ``during`` runs beside it;
    ``confirm`` is the inline confirmation of a human at the terminal (as ``chat`` on a tty)."""

    migrated_data_dir(settings.data_dir, settings.database_url)

    async def main() -> Outcome:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            service = AgentService(manager, poll_seconds=0.05)
            run = service.start(persona, requester, message, confirm=confirm)
            events: list[Event] = []

            async def follow() -> None:
                async for _seq, event in service.follow(run.id):
                    events.append(to_event(event))

            try:
                if during is None:
                    await follow()
                else:
                    await asyncio.gather(follow(), during(manager, service, run))
                record = await service.finished(run.id)
            finally:
                await service.close()
            return Outcome(record, service.body(run.id), events)

    return asyncio.run(main())


def envelope(content: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(content)
    return body
