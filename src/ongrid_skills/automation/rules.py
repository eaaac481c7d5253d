"""A trigger's document: its role and its rules, checked when it is saved, and matched against
each alert.

``{"role": "viewer"|"operator"|"admin", "rules": [rule, …]}``, each rule:

- ``name`` (required, unique in the trigger), ``match`` (label → exact value), ``match_re``
  (label → regular expression, anchored at both ends as in Alertmanager, at most
  :data:`MAX_PATTERN` characters, no nested repetition), ``status`` (``["firing"]`` by
  default; add ``"resolved"`` to start something for resolved alerts too);
- what it starts, one of: ``skill`` with ``args`` (a template, see :mod:`.template`) and an
  optional ``persona``; or ``agent``: ``{"persona": …, "prompt": template}``;
- ``rate_limit``: ``{"max": n, "per_seconds": s}`` (default 10 per hour): beyond it an alert
  starts nothing (recorded as ``rate_limited``);
- ``on_resolved``: ``annotate`` (default: the start is marked resolved) or ``stop`` (its call
  or run is cancelled, its pending approval withdrawn);
- ``notify``: post the outcome to the approval webhooks' channels (default false).

Unknown keys are refused: a typo must not silently match everything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.automation import template
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.types import Role

MAX_RULES = 32
MAX_PATTERN = 256
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_NESTED = re.compile(r"\([^)]*[+*}][^)]*\)\s*[+*{]")
_RULE_KEYS = {
    "name",
    "match",
    "match_re",
    "status",
    "skill",
    "args",
    "persona",
    "agent",
    "rate_limit",
    "on_resolved",
    "notify",
}


@dataclass(frozen=True)
class Rule:
    name: str
    match: dict[str, str]
    match_re: dict[str, re.Pattern[str]]
    status: tuple[str, ...]
    skill: str | None
    args: Any
    persona: str | None
    prompt: str | None
    rate_max: int
    rate_seconds: float
    on_resolved: str
    notify: bool

    def matches(self, alert: dict[str, Any]) -> bool:
        """Whether the alert's labels match (its status is the caller's business)."""
        labels: dict[str, str] = alert["labels"]
        if any(labels.get(key) != value for key, value in self.match.items()):
            return False
        return all(
            key in labels and pattern.fullmatch(labels[key])
            for key, pattern in self.match_re.items()
        )


@dataclass(frozen=True)
class TriggerSpec:
    role: Role
    rules: list[Rule] = field(default_factory=list)


def name_ok(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest(
            f"a {what} name is 1-64 of a-z 0-9 _ - (starting with a letter or digit)"
        )
    return name


def parse_spec(doc: Any) -> TriggerSpec:
    """The checked spec of a trigger document; InvalidRequest names the first problem."""
    if not isinstance(doc, dict):
        raise InvalidRequest("a trigger is a JSON object")
    unknown = set(doc) - {"role", "rules"}
    if unknown:
        raise InvalidRequest(f"unknown key(s) in the trigger: {sorted(unknown)}")
    try:
        role = Role(doc.get("role", "viewer"))
    except ValueError:
        raise InvalidRequest("role must be viewer, operator or admin") from None
    rules = doc.get("rules")
    if not isinstance(rules, list) or not rules or len(rules) > MAX_RULES:
        raise InvalidRequest(f"rules must be a list of 1 to {MAX_RULES} rules")
    parsed = [_rule(item, n) for n, item in enumerate(rules)]
    names = [r.name for r in parsed]
    if len(set(names)) != len(names):
        raise InvalidRequest("rule names must be unique in a trigger")
    return TriggerSpec(role, parsed)


def _rule(item: Any, n: int) -> Rule:
    where = f"rules[{n}]"
    if not isinstance(item, dict):
        raise InvalidRequest(f"{where} must be an object")
    unknown = set(item) - _RULE_KEYS
    if unknown:
        raise InvalidRequest(f"{where}: unknown key(s) {sorted(unknown)}")
    name = name_ok(item.get("name"), "rule")
    match = _strings(item.get("match", {}), f"{where}.match")
    match_re = {
        k: _pattern(v, f"{where}.match_re.{k}")
        for k, v in _strings(item.get("match_re", {}), f"{where}.match_re").items()
    }
    status = item.get("status", ["firing"])
    if not isinstance(status, list) or not status or not set(status) <= {"firing", "resolved"}:
        raise InvalidRequest(f"{where}.status must be a list of firing and/or resolved")
    skill, agent = item.get("skill"), item.get("agent")
    if (skill is None) == (agent is None):
        raise InvalidRequest(f"{where}: give either skill (with args) or agent, not both")
    prompt = persona = None
    args: Any = None
    if skill is not None:
        if not isinstance(skill, str) or not skill:
            raise InvalidRequest(f"{where}.skill must be a skill name")
        args = item.get("args", {})
        if not isinstance(args, dict):
            raise InvalidRequest(f"{where}.args must be an object (a template)")
        template.check(args, f"{where}.args")
        persona = item.get("persona")
        if persona is not None and not isinstance(persona, str):
            raise InvalidRequest(f"{where}.persona must be a persona name")
    else:
        if not isinstance(agent, dict) or set(agent) - {"persona", "prompt"}:
            raise InvalidRequest(f"{where}.agent must be {{persona, prompt}}")
        persona, prompt = agent.get("persona"), agent.get("prompt")
        if not isinstance(persona, str) or not isinstance(prompt, str) or not prompt.strip():
            raise InvalidRequest(f"{where}.agent needs a persona and a prompt")
        template.check(prompt, f"{where}.agent.prompt")
    rate = item.get("rate_limit", {"max": 10, "per_seconds": 3600})
    if (
        not isinstance(rate, dict)
        or set(rate) != {"max", "per_seconds"}
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in rate.values())
    ):
        raise InvalidRequest(f"{where}.rate_limit must be {{max, per_seconds}}, positive integers")
    on_resolved = item.get("on_resolved", "annotate")
    if on_resolved not in ("annotate", "stop"):
        raise InvalidRequest(f"{where}.on_resolved must be annotate or stop")
    notify = item.get("notify", False)
    if not isinstance(notify, bool):
        raise InvalidRequest(f"{where}.notify must be true or false")
    return Rule(
        name=name,
        match=match,
        match_re=match_re,
        status=tuple(status),
        skill=skill,
        args=args,
        persona=persona,
        prompt=prompt,
        rate_max=rate["max"],
        rate_seconds=float(rate["per_seconds"]),
        on_resolved=on_resolved,
        notify=notify,
    )


def _strings(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidRequest(f"{where} must be an object of label name → string")
    return dict(value)


def _pattern(text: str, where: str) -> re.Pattern[str]:
    if len(text) > MAX_PATTERN:
        raise InvalidRequest(f"{where}: at most {MAX_PATTERN} characters")
    if _NESTED.search(text) or re.search(r"\\[1-9]", text):
        raise InvalidRequest(f"{where}: nested repetition and backreferences are refused")
    try:
        return re.compile(text)
    except re.error as exc:
        raise InvalidRequest(f"{where}: {exc}") from None
