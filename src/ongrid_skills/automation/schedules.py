"""Schedules (SPEC §21): cron expressions that start a safe skill call or an agent run, kept in
the database, each firing claimed there once (``store/schedules.py``), whichever replicas run.

Every process runs a :class:`Schedules` ticker (:meth:`Schedules.run`, in the served app's
lifespan). At each tick it reads the schedules, asks :func:`.cron.due` which firing is due, and
tries to claim it; the one process whose claim lands starts it as ``schedule:<name>``, a
principal with the viewer role, so only safe skills run (the gate says so at every firing, not
only when the schedule was saved). A firing missed while everything was down (due longer ago
than ``ONGRID_SCHEDULE_LATE_SECONDS``) runs once at the next start, or is skipped, per the
schedule's ``missed``; several missed firings collapse into one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from ongrid_skills.agent.kernel import AgentService
from ongrid_skills.automation import outcomes
from ongrid_skills.automation.cron import ScheduleSpec, due, parse_schedule
from ongrid_skills.automation.rules import name_ok
from ongrid_skills.errors import Conflict, InvalidArgs, InvalidRequest, NotFound, SkillError
from ongrid_skills.execution.records import new_id
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.store.schedules import Firing, StoredSchedule
from ongrid_skills.types import Role, SkillClass

LOG = logging.getLogger("ongrid_skills.automation")


class Schedules:
    """The schedules of one manager: keep them, fire them, show them."""

    def __init__(self, manager: Manager, agents: AgentService | None, *, tick: float = 0.5) -> None:
        self.m = manager
        self.agents = agents
        self.store = manager.store.schedules
        self.tick = tick
        self.late_after = manager.settings.schedule_late_seconds
        self.watchers: set[asyncio.Task[None]] = set()

    # ---- management ------------------------------------------------------------------------
    def put(self, name: str, doc: Any, actor: str) -> bool:
        name_ok(name, "schedule")
        spec = parse_schedule(doc)
        registry = self.m.registry
        if spec.skill is not None:
            skill = registry.get(spec.skill)
            if skill.skill_class is not SkillClass.SAFE:
                raise InvalidRequest(f"a schedule runs safe skills only; {skill.name} is not")
            violations = skill.validate(spec.args)
            if violations:  # found now, not at 7:00 tomorrow
                raise InvalidArgs(skill.name, violations)
        else:
            assert spec.persona is not None
            registry.persona(spec.persona)
        return self.store.put(name, doc, actor)

    def pause(self, name: str, actor: str) -> None:
        self.store.set_paused(name, True, actor)

    def resume(self, name: str, actor: str) -> None:
        self.store.set_paused(name, False, actor)

    def delete(self, name: str, actor: str) -> None:
        self.store.delete(name, actor)

    async def run_now(self, name: str, actor: str) -> dict[str, Any]:
        schedule = self._get(name)
        now = time.time()
        firing = Firing(
            new_id(), name, now, "manual", "pending", None, None, self.m.replica_id, now
        )
        with self.m.store.tx() as conn:
            self.m.store.audit.append(conn, actor, "schedule.run_now", name, {"firing": firing.id})
        if not self.store.claim(firing, advance=False):
            raise Conflict("a firing at this instant exists; try again")
        return await self._fire(schedule, firing)

    def view(self, schedule: StoredSchedule) -> dict[str, Any]:
        spec = parse_schedule(schedule.spec)
        upcoming = None if schedule.paused else spec.next_after(max(schedule.base, time.time() - 1))
        return {
            "name": schedule.name,
            **schedule.spec,
            "paused": schedule.paused,
            "next_fire_at": upcoming,
            "created_by": schedule.created_by,
            "created_at": schedule.created_at,
            "updated_by": schedule.updated_by,
            "updated_at": schedule.updated_at,
            "recent": [self._outcome(f) for f in self.store.recent(schedule.name)],
        }

    def list(self) -> list[dict[str, Any]]:
        return [self.view(s) for s in self.store.all()]

    def get(self, name: str) -> dict[str, Any]:
        return self.view(self._get(name))

    def _get(self, name: str) -> StoredSchedule:
        found = self.store.get(name)
        if found is None:
            raise NotFound(f"no schedule named {name!r}")
        return found

    def _outcome(self, firing: Firing) -> dict[str, Any]:
        out = firing.to_dict()
        if firing.target_id is not None:
            with contextlib.suppress(Exception):
                if firing.kind == "call":
                    out["status"] = self.m.get(firing.target_id).status.value
                elif firing.kind == "run" and self.agents is not None:
                    out["status"] = self.agents.get(firing.target_id).status.value
        return out

    # ---- the ticker ------------------------------------------------------------------------
    async def run(self) -> None:
        """Tick until cancelled; a failing tick is logged and the next one tries again."""
        while True:
            try:
                await self.beat(time.time())
            except Exception:
                LOG.exception("the schedules' tick failed")
            await asyncio.sleep(self.tick)

    async def beat(self, now: float) -> None:
        for schedule in await asyncio.to_thread(self.store.all):
            if schedule.paused:
                continue
            try:
                spec = parse_schedule(schedule.spec)
            except InvalidRequest:
                continue
            found = due(spec, schedule.base, now, self.late_after)
            if found is None:
                continue
            fire_time, missed = found
            skip = missed and spec.missed == "skip"
            how = "missed" if missed else "on_time"
            firing = Firing(
                new_id(),
                schedule.name,
                fire_time,
                how,
                "skipped" if skip else "pending",
                None,
                "missed while nothing ran; the schedule skips missed firings" if skip else None,
                self.m.replica_id,
                now,
            )
            if await asyncio.to_thread(self.store.claim, firing, advance=True) and not skip:
                await self._fire(schedule, firing)

    async def _fire(self, schedule: StoredSchedule, firing: Firing) -> dict[str, Any]:
        spec = parse_schedule(schedule.spec)
        principal = Principal(f"schedule:{schedule.name}", Role.VIEWER, human=False)
        kind, target, error = await self._launch(spec, principal)
        await asyncio.to_thread(self.store.finish, firing.id, kind, target, error)
        if target is not None and spec.notify:
            task = outcomes.post_when_done(
                self.m, self.agents, principal.name, firing.id, kind, target
            )
            if task is not None:
                self.watchers.add(task)
                task.add_done_callback(self.watchers.discard)
        return {"id": firing.id, "kind": kind, "target_id": target, "error": error}

    async def _launch(
        self, spec: ScheduleSpec, principal: Principal
    ) -> tuple[str, str | None, str | None]:
        try:
            if spec.skill is not None:
                execution = await self.m.submit(
                    spec.skill, spec.args, principal=principal, wait=False
                )
                return "call", execution.id, None
            if self.agents is None:
                raise Conflict("no agent service in this process")
            assert spec.persona is not None and spec.prompt is not None
            run = self.agents.start(spec.persona, principal, spec.prompt)
            return "run", run.record.id, None
        except SkillError as exc:
            return "failed", None, f"{exc.code}: {exc.message}"[:500]

    async def close(self) -> None:
        for task in list(self.watchers):
            task.cancel()
        await asyncio.gather(*self.watchers, return_exceptions=True)
