"""The args and prompt templates of triggers: ``{labels.x}`` substitution, nothing else.

A template is any JSON value; in its strings, ``{labels.NAME}``, ``{annotations.NAME}``,
``{status}``, ``{fingerprint}``, ``{startsAt}`` and ``{alert}`` (the alert as compact JSON) are
replaced by the alert's values, and ``{{`` / ``}}`` stand for literal braces. There is no
expression, filter, attribute access or code: a template language that cannot run anything is
the point (the values come from whoever can post alerts). Substitution is one pass over the
template only, so a label whose value looks like a placeholder stays that text. A placeholder
naming a key the alert does not have is an error (:class:`TemplateError`), never an empty
string; so is anything else in braces (checked when the trigger is saved: :func:`check`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ongrid_skills.errors import InvalidRequest

#: ``{{``, ``}}``, or one placeholder in braces.
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NAME = re.compile(
    r"(labels|annotations)\.([A-Za-z_][A-Za-z0-9_]{0,127})|status|fingerprint|startsAt|alert"
)


class TemplateError(InvalidRequest):
    """A template that names a key the alert lacks, or that is not a template of ours."""


def check(template: Any, where: str) -> None:
    """Raise InvalidRequest if any string in ``template`` holds a malformed placeholder."""
    for text in _strings(template):
        for match in _TOKEN.finditer(text):
            if match.group(0) in ("{{", "}}"):
                continue
            inner = match.group(1)
            if inner is None or not _NAME.fullmatch(inner.strip()):
                raise InvalidRequest(
                    f"{where}: {match.group(0)!r} is not a placeholder: use {{labels.NAME}}, "
                    "{annotations.NAME}, {status}, {fingerprint}, {startsAt} or {alert} "
                    "({{ and }} for braces)"
                )


def render(template: Any, alert: dict[str, Any]) -> Any:
    """``template`` with every placeholder replaced by ``alert``'s value; TemplateError if a
    key is missing."""
    if isinstance(template, str):
        return _TOKEN.sub(lambda m: _value(m, alert), template)
    if isinstance(template, list):
        return [render(item, alert) for item in template]
    if isinstance(template, dict):
        return {key: render(value, alert) for key, value in template.items()}
    return template


def _value(match: re.Match[str], alert: dict[str, Any]) -> str:
    text = match.group(0)
    if text in ("{{", "}}"):
        return text[0]
    inner = (match.group(1) or "").strip()
    if inner == "alert":
        return json.dumps(alert, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if inner in ("status", "fingerprint", "startsAt"):
        return str(alert.get(inner, ""))
    found = _NAME.fullmatch(inner)
    if found is None or found.group(1) is None:
        raise TemplateError(f"{text!r} is not a placeholder")
    values = alert.get(found.group(1)) or {}
    if found.group(2) not in values:
        raise TemplateError(f"the alert has no {found.group(1)[:-1]} {found.group(2)!r}")
    return str(values[found.group(2)])


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []
