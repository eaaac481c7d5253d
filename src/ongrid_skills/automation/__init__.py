"""Triggers and schedules (SPEC §21): alerts and clocks that start skill calls and agent runs
under the same gate as any caller.

- :mod:`.alerts` checks what Alertmanager (or anything else) posts, :mod:`.rules` a trigger's
  document, :mod:`.template` the ``{labels.x}`` substitution of its args and prompts;
  :mod:`.triggers` receives an alert and starts what its rules say.
- :mod:`.cron` reads a schedule and its clock (croniter, time zones); :mod:`.schedules` keeps
  them and fires each firing once, claimed in the database.
- :mod:`.outcomes` posts what they started, once it ended, to the approval webhooks' channels.

The served app opens it with :func:`open_automation` beside the agent service and hangs it on
the doors' ``state.automation``. It stands above the agent kernel and below the doors.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ongrid_skills.agent.kernel import AgentService
from ongrid_skills.automation.schedules import Schedules
from ongrid_skills.automation.triggers import Triggers
from ongrid_skills.manager import Manager


@dataclass
class Automation:
    triggers: Triggers
    schedules: Schedules


@asynccontextmanager
async def open_automation(
    manager: Manager, agents: AgentService | None, *, tick: float = 0.5
) -> AsyncIterator[Automation]:
    """Triggers and schedules of a served manager; the schedules' ticker runs meanwhile."""
    automation = Automation(Triggers(manager, agents), Schedules(manager, agents, tick=tick))
    ticker = asyncio.get_running_loop().create_task(automation.schedules.run())
    try:
        yield automation
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
        await automation.triggers.close()
        await automation.schedules.close()


__all__ = ["Automation", "Schedules", "Triggers", "open_automation"]
