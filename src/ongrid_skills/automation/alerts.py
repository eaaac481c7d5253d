"""What a trigger receives, checked before anything else: Alertmanager's webhook payload
(``version: "4"``, grouped alerts) or a generic one, into a list of plain alerts.

Alertmanager's body (its ``webhook_config`` receiver) is ``{"version": "4", "groupKey": …,
"status": …, "receiver": …, "groupLabels": {…}, "commonLabels": {…}, "commonAnnotations": {…},
"externalURL": …, "truncatedAlerts": n, "alerts": [{"status", "labels", "annotations",
"startsAt", "endsAt", "generatorURL", "fingerprint"}, …]}``. A generic body is one alert
(``{"status"?, "labels", "annotations"?, "fingerprint"?, "startsAt"?}``) or ``{"alerts": […]}``
of them. Anything else is refused whole (:class:`~ongrid_skills.errors.InvalidRequest`, 400)
and starts nothing: wrong types, more than :data:`MAX_ALERTS` alerts, nesting deeper than
:data:`MAX_DEPTH`, label names that are not Prometheus label names, values longer than
:data:`MAX_VALUE`, and template syntax (``{{``, ``{%``, ``${``, ``{labels.…}``) in any value —
a rendered Prometheus template never holds it, so its presence is a bug or an injection
attempt, and refusing it beats guessing.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ongrid_skills.errors import InvalidRequest

MAX_ALERTS = 200
MAX_LABELS = 64
MAX_VALUE = 4096
MAX_DEPTH = 8
STATUSES = ("firing", "resolved")

_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_TEMPLATE_SYNTAX = re.compile(r"\{\{|\{%|\{#|\$\{|\{\s*(labels|annotations|alert|status)\b")
_FINGERPRINT = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def parse(body: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The alerts of ``body`` (each ``status``, ``labels``, ``annotations``, ``fingerprint``,
    ``startsAt``) and the group (Alertmanager's receiver, group key, external URL)."""
    _depth(body, 0)
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    if "alerts" in body:
        raw = body["alerts"]
        if not isinstance(raw, list):
            raise InvalidRequest("alerts must be a list")
        if len(raw) > MAX_ALERTS:
            raise InvalidRequest(f"at most {MAX_ALERTS} alerts per notification")
        if "version" in body and body["version"] != "4":
            raise InvalidRequest("only version 4 of Alertmanager's webhook payload is read")
        group = {
            key: _text(body.get(key), key)
            for key in ("receiver", "groupKey", "externalURL", "status")
            if body.get(key) is not None
        }
        return [_alert(item, f"alerts[{n}]") for n, item in enumerate(raw)], group
    return [_alert(body, "body")], {}


def _alert(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InvalidRequest(f"{where} must be an object")
    status = item.get("status", "firing")
    if status not in STATUSES:
        raise InvalidRequest(f"{where}.status must be firing or resolved")
    labels = _labels(item.get("labels"), f"{where}.labels", required=True)
    annotations = _labels(item.get("annotations", {}), f"{where}.annotations", required=False)
    fingerprint = item.get("fingerprint")
    if fingerprint is None:  # a generic alert: its labels identify it, as in Alertmanager
        canonical = json.dumps(labels, sort_keys=True, separators=(",", ":"))
        fingerprint = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    elif not isinstance(fingerprint, str) or not _FINGERPRINT.fullmatch(fingerprint):
        raise InvalidRequest(f"{where}.fingerprint must be up to 64 letters, digits or ._:-")
    starts_at = _text(item.get("startsAt", ""), f"{where}.startsAt")[:64]
    return {
        "status": status,
        "labels": labels,
        "annotations": annotations,
        "fingerprint": fingerprint,
        "startsAt": starts_at,
    }


def _labels(value: Any, where: str, *, required: bool) -> dict[str, str]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict) or (required and not value):
        raise InvalidRequest(f"{where} must be an object of strings" + (" (not empty)" * required))
    if len(value) > MAX_LABELS:
        raise InvalidRequest(f"{where}: at most {MAX_LABELS} entries")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not _LABEL.fullmatch(key):
            raise InvalidRequest(f"{where}: {key[:64]!r} is not a label name")
        out[key] = _text(item, f"{where}.{key}")
    return out


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{where} must be a string")
    if len(value) > MAX_VALUE:
        raise InvalidRequest(f"{where}: longer than {MAX_VALUE} characters")
    if _TEMPLATE_SYNTAX.search(value):
        raise InvalidRequest(f"{where}: template syntax in an alert is refused")
    return value


def _depth(value: Any, level: int) -> None:
    if level > MAX_DEPTH:
        raise InvalidRequest(f"the body is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for item in value.values():
            _depth(item, level + 1)
    elif isinstance(value, list):
        for item in value:
            _depth(item, level + 1)
