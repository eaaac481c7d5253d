"""The ``{labels.x}`` templates of triggers: substitution only, unknown keys are errors, and an
alert's values are never expanded again."""

from __future__ import annotations

from typing import Any

import pytest

from ongrid_skills.automation import template
from ongrid_skills.errors import InvalidRequest

ALERT: dict[str, Any] = {
    "status": "firing",
    "labels": {"alertname": "DiskFull", "instance": "web-1", "sneaky": "{labels.instance}"},
    "annotations": {"summary": "95 % full"},
    "fingerprint": "abc",
    "startsAt": "2026-12-05T10:00:00Z",
}


def test_placeholders_in_nested_args_are_replaced_by_the_alerts_values() -> None:
    args = {"host": "{labels.instance}", "why": ["{annotations.summary} ({status})"], "n": 3}
    assert template.render(args, ALERT) == {"host": "web-1", "why": ["95 % full (firing)"], "n": 3}


def test_doubled_braces_are_literal_and_a_value_that_looks_like_a_placeholder_stays_text() -> None:
    assert template.render("{{x}} {labels.sneaky}", ALERT) == "{x} {labels.instance}"


def test_a_label_the_alert_lacks_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(template.TemplateError, match="pod"):
        template.render({"pod": "{labels.pod}"}, ALERT)


@pytest.mark.parametrize(
    "text",
    ["{labels}", "{__import__('os')}", "{labels.x.y}", "{ 7*7 }", "{labels[0]}", "a { b", "}"],
)
def test_anything_but_a_placeholder_in_braces_is_refused_when_saved(text: str) -> None:
    with pytest.raises(InvalidRequest):
        template.check({"a": [text]}, "args")
