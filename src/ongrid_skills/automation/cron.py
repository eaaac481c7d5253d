"""A schedule's document and its clock: cron with a time zone (``croniter``), and which firing
is due now.

``{"cron": "0 7 * * *", "timezone": "Europe/Paris", "missed": "run_once"|"skip", then either
"skill": name, "args": {...} or "agent": {"persona": …, "prompt": …}, "notify": bool}``. Five
fields as usual, or six with the sixth counting seconds (croniter's form: ``* * * * * */5``
is every five seconds); ``timezone`` is an IANA name (default UTC), so ``0 7 * * *`` stays at
7:00 local time across daylight-saving changes. Unknown keys are refused.

:func:`due` answers, from the schedule's base (its last firing, or when it was created or
resumed) and now: nothing is due; or the latest due fire time and whether it was missed (due
longer ago than ``late_after`` seconds: everything was down when it came).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ongrid_skills.errors import InvalidRequest

_KEYS = {"cron", "timezone", "missed", "skill", "args", "agent", "notify"}


@dataclass(frozen=True)
class ScheduleSpec:
    cron: str
    timezone: str
    missed: str
    skill: str | None
    args: dict[str, Any]
    persona: str | None
    prompt: str | None
    notify: bool

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def next_after(self, when: float) -> float:
        """The first fire time strictly after ``when`` (UNIX seconds)."""
        start = datetime.fromtimestamp(when, self.zone)
        return float(croniter(self.cron, start).get_next(float))

    def latest_at_or_before(self, when: float) -> float:
        start = datetime.fromtimestamp(when + 0.001, self.zone)
        return float(croniter(self.cron, start).get_prev(float))


def parse_schedule(doc: Any) -> ScheduleSpec:
    if not isinstance(doc, dict):
        raise InvalidRequest("a schedule is a JSON object")
    unknown = set(doc) - _KEYS
    if unknown:
        raise InvalidRequest(f"unknown key(s) in the schedule: {sorted(unknown)}")
    cron = doc.get("cron")
    if not isinstance(cron, str) or len(cron.split()) not in (5, 6) or len(cron) > 200:
        raise InvalidRequest("cron must be 5 fields (or 6, the sixth for seconds)")
    if not croniter.is_valid(cron):
        raise InvalidRequest(f"cron {cron!r} is not a valid expression")
    timezone = doc.get("timezone", "UTC")
    try:
        if not isinstance(timezone, str):
            raise ValueError
        ZoneInfo(timezone)
    except (ValueError, ZoneInfoNotFoundError):
        raise InvalidRequest(
            "timezone must be an IANA time zone name (e.g. Europe/Paris)"
        ) from None
    missed = doc.get("missed", "run_once")
    if missed not in ("run_once", "skip"):
        raise InvalidRequest("missed must be run_once or skip")
    skill, agent = doc.get("skill"), doc.get("agent")
    if (skill is None) == (agent is None):
        raise InvalidRequest("give either skill (with args) or agent, not both")
    persona = prompt = None
    args: Any = {}
    if skill is not None:
        args = doc.get("args", {})
        if not isinstance(skill, str) or not isinstance(args, dict):
            raise InvalidRequest("skill must be a name and args an object")
    else:
        if not isinstance(agent, dict) or set(agent) - {"persona", "prompt"}:
            raise InvalidRequest("agent must be {persona, prompt}")
        persona, prompt = agent.get("persona"), agent.get("prompt")
        if not isinstance(persona, str) or not isinstance(prompt, str) or not prompt.strip():
            raise InvalidRequest("agent needs a persona and a prompt")
    notify = doc.get("notify", False)
    if not isinstance(notify, bool):
        raise InvalidRequest("notify must be true or false")
    return ScheduleSpec(cron, timezone, missed, skill, args, persona, prompt, notify)


def due(
    spec: ScheduleSpec, base: float, now: float, late_after: float
) -> tuple[float, bool] | None:
    """The latest fire time in (base, now] and whether it was missed; None if none is due."""
    if spec.next_after(base) > now:
        return None
    latest = spec.latest_at_or_before(now)
    return latest, now - latest > late_after
