"""A trigger's rules and a schedule's clock, checked when saved: unknown keys, unsafe regular
expressions, time zones, and which firing is due (on time or missed)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from ongrid_skills.automation.cron import due, parse_schedule
from ongrid_skills.automation.rules import parse_spec
from ongrid_skills.errors import InvalidRequest

RULE: dict[str, Any] = {"name": "r", "skill": "s", "args": {}}


def test_match_re_is_anchored_at_both_ends_as_in_alertmanager() -> None:
    rule = parse_spec({"rules": [{**RULE, "match_re": {"instance": "web-[0-9]+"}}]}).rules[0]
    alert = {"status": "firing", "labels": {"instance": "web-12"}}
    assert rule.matches(alert)
    assert not rule.matches({**alert, "labels": {"instance": "xweb-12"}})
    assert not rule.matches({**alert, "labels": {"instance": "web-12x"}})
    assert not rule.matches({**alert, "labels": {}})


@pytest.mark.parametrize(
    "change",
    [
        {"match_re": {"a": "(a+)+$"}},
        {"match_re": {"a": "(x*)*"}},
        {"match_re": {"a": r"(a)\1"}},
        {"match_re": {"a": "x" * 300}},
        {"match_re": {"a": "("}},
        {"matches": {"a": "b"}},
        {"status": ["pending"]},
        {"agent": {"persona": "p", "prompt": "x"}},
        {"rate_limit": {"max": 0, "per_seconds": 60}},
        {"on_resolved": "delete"},
        {"name": "Bad Name"},
    ],
)
def test_a_rule_that_could_hang_mislead_or_mean_two_things_is_refused(
    change: dict[str, Any],
) -> None:
    with pytest.raises(InvalidRequest):
        parse_spec({"rules": [{**RULE, **change}]})


def test_a_trigger_with_an_unknown_role_or_duplicate_rule_names_is_refused() -> None:
    for doc in ({"role": "root", "rules": [RULE]}, {"rules": [RULE, RULE]}, {"rules": []}):
        with pytest.raises(InvalidRequest):
            parse_spec(doc)


def test_a_daily_cron_keeps_its_local_time_across_a_daylight_saving_change() -> None:
    spec = parse_schedule({"cron": "0 7 * * *", "timezone": "Europe/Paris", "skill": "s"})
    paris = ZoneInfo("Europe/Paris")
    before = datetime(2026, 10, 23, 12, 0, tzinfo=paris).timestamp()  # summer time (UTC+2)
    first = spec.next_after(before)
    second = spec.next_after(first)
    assert [datetime.fromtimestamp(t, paris).hour for t in (first, second)] == [7, 7]
    assert second - first == 25 * 3600  # the night the clocks went back


def test_a_firing_is_on_time_when_found_soon_and_missed_when_found_late() -> None:
    spec = parse_schedule({"cron": "0 * * * *", "skill": "s"})
    hour = datetime(2026, 12, 5, 10, 0, tzinfo=ZoneInfo("UTC")).timestamp()
    assert due(spec, hour - 60, hour - 1, 60) is None
    assert due(spec, hour - 60, hour + 5, 60) == (hour, False)
    assert due(spec, hour - 3 * 3600, hour + 600, 60) == (
        hour,
        True,
    )  # three missed: one, the latest
