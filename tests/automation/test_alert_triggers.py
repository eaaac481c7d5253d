"""Alert triggers end to end: a real ``serve`` on loopback and a real Alertmanager routing to it
(one of each for the module), alerts posted to Alertmanager's API so that what the trigger
receives is Alertmanager's own payload; and the same trigger posted to directly for duplicates,
rate limits, resolved alerts, the gate and hostile bodies."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.alertmanager import Alertmanager, running_alertmanager, webhook_config
from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_skill
from tests.support.waiting import wait_for

ECHO = "#!/bin/sh\ncat\n"
SLOW = "#!/bin/sh\ncat >/dev/null\nsleep 30\necho '{}'\n"


def _schema(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {n: {"type": "string"} for n in names},
        "required": list(names),
        "additionalProperties": False,
    }


def _skills(root: Path) -> None:
    write_skill(root, "diagnose", ECHO, schema=_schema("instance", "summary"), **{"class": "safe"})
    write_skill(root, "restart_service", ECHO, schema=_schema("service"), **{"class": "mutating"})
    write_skill(root, "slow_probe", SLOW, schema=_schema("instance"), **{"class": "safe"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = serve_for_cli(tmp_path_factory.mktemp("triggers"), _skills)
    try:
        yield served
    finally:
        stop(served.process)


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    nowhere = "http://127.0.0.1:9/unused"
    with running_alertmanager(tmp_path_factory.mktemp("am"), webhook_config(nowhere)) as am:
        yield am


def make_trigger(served: Served, name: str, *rules: dict[str, Any], role: str = "viewer") -> str:
    answer = served.http("PUT", f"/v1/triggers/{name}", json={"role": role, "rules": list(rules)})
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


def deliver(served: Served, name: str, token: str, body: Any, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}
    return httpx.post(
        f"{served.url}/v1/triggers/{name}", headers=headers, timeout=30, json=body, **kw
    )


def alert(status: str = "firing", fingerprint: str = "f1", **labels: str) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": "HostDown", "instance": "web-1", **labels},
        "annotations": {"summary": "web-1 is down"},
        "startsAt": "2026-12-05T10:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": fingerprint,
    }


def grouped(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="HostDown"}',
        "truncatedAlerts": 0,
        "status": alerts[0]["status"],
        "receiver": "ongrid",
        "groupLabels": {"alertname": "HostDown"},
        "commonLabels": {"alertname": "HostDown"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


def recent(served: Served, name: str) -> list[dict[str, Any]]:
    body = served.http("GET", f"/v1/triggers/{name}", "olga").json()
    items: list[dict[str, Any]] = body["recent"]
    return items


DIAGNOSE = {
    "name": "diagnose",
    "match": {"alertname": "HostDown"},
    "skill": "diagnose",
    "args": {"instance": "{labels.instance}", "summary": "{annotations.summary}"},
}


def test_an_alert_posted_to_alertmanager_starts_the_rules_call_with_args_from_its_labels(
    served: Served, alertmanager: Alertmanager
) -> None:
    token = make_trigger(served, "am", DIAGNOSE)
    alertmanager.reconfigure(webhook_config(f"{served.url}/v1/triggers/am", bearer=token))
    alertmanager.post(
        {
            "labels": {"alertname": "HostDown", "instance": "db-7"},
            "annotations": {"summary": "db-7 down"},
        }
    )
    start = wait_for(lambda: next(iter(recent(served, "am")), None), "the trigger to start", 20)
    assert start["kind"] == "call", start
    execution = served.final(start["target_id"])
    assert execution["status"] == "succeeded", execution
    assert execution["args"] == {"instance": "db-7", "summary": "db-7 down"}
    assert execution["requested_by"] == "trigger:am"
    audit = served.http("GET", "/v1/audit", params={"actor": "trigger:am"}).json()
    assert "trigger.fired" in [e["action"] for e in audit["items"]]
    # Alertmanager's own resolved notification (send_resolved) marks the start resolved.
    ended = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    alertmanager.post(
        {
            "labels": {"alertname": "HostDown", "instance": "db-7"},
            "annotations": {"summary": "db-7 down"},
            "endsAt": ended,
        }
    )
    wait_for(lambda: recent(served, "am")[0]["resolved_at"], "the resolved notification", 20)
    assert len(recent(served, "am")) == 1  # resolving started nothing new


def test_alertmanagers_basic_auth_credentials_are_accepted_and_a_wrong_token_is_not(
    served: Served,
) -> None:
    token = make_trigger(served, "basic", {**DIAGNOSE, "match": {"alertname": "Nope"}})
    basic = base64.b64encode(f"alertmanager:{token}".encode()).decode()
    ok = deliver(
        served, "basic", "x", grouped(alert()), headers={"Authorization": f"Basic {basic}"}
    )
    assert ok.status_code == 200, ok.text
    for wrong in (f"Bearer {token}x", "Bearer " + served.tokens["admin"], ""):
        answer = deliver(served, "basic", "x", grouped(alert()), headers={"Authorization": wrong})
        assert answer.status_code == 401, answer.text
    unknown = deliver(served, "no-such-trigger", token, grouped(alert()))
    assert unknown.status_code == 401


def test_repeated_notifications_of_one_firing_alert_start_nothing_new(served: Served) -> None:
    token = make_trigger(served, "dup", DIAGNOSE)
    first = deliver(served, "dup", token, grouped(alert(fingerprint="aa")))
    again = deliver(served, "dup", token, grouped(alert(fingerprint="aa")))
    assert len(first.json()["started"]) == 1, first.text
    assert again.json()["started"] == [] and again.json()["duplicates"] == 1, again.text
    assert len(recent(served, "dup")) == 1


def test_a_rule_starts_no_more_than_its_rate_limit(served: Served) -> None:
    rule = {**DIAGNOSE, "rate_limit": {"max": 2, "per_seconds": 3600}}
    token = make_trigger(served, "rate", rule)
    answers = [
        deliver(served, "rate", token, grouped(alert(fingerprint=f"r{n}"))).json() for n in range(4)
    ]
    assert [len(a["started"]) for a in answers] == [1, 1, 0, 0]
    assert [a["rate_limited"] for a in answers] == [0, 0, 1, 1]


def test_a_mutating_rule_waits_in_the_approval_inbox_with_the_alert_attached(
    served: Served,
) -> None:
    rule = {
        "name": "restart",
        "match_re": {"instance": "web-[0-9]+"},
        "skill": "restart_service",
        "args": {"service": "nginx@{labels.instance}"},
    }
    token = make_trigger(served, "fixer", rule, role="operator")
    started = deliver(served, "fixer", token, grouped(alert(fingerprint="m1"))).json()["started"]
    execution = served.http("GET", f"/v1/executions/{started[0]['target_id']}").json()
    assert execution["status"] == "pending_approval", execution
    approval = served.http("GET", f"/v1/approvals/{execution['approval_id']}").json()
    assert approval["args"] == {"service": "nginx@web-1"}
    assert approval["requested_by"] == "trigger:fixer"
    assert approval["context"]["alert"]["labels"]["instance"] == "web-1"
    assert approval["context"]["trigger"] == "fixer"


def test_a_viewer_trigger_is_refused_a_mutating_call_and_starts_nothing(served: Served) -> None:
    rule = {"name": "restart", "skill": "restart_service", "args": {"service": "x"}}
    token = make_trigger(served, "viewer", rule, role="viewer")
    started = deliver(served, "viewer", token, grouped(alert(fingerprint="v1"))).json()["started"]
    assert started[0]["kind"] == "failed" and started[0]["error"].startswith("denied"), started


def test_a_resolved_alert_stops_what_its_firing_started_when_the_rule_says_stop(
    served: Served,
) -> None:
    rule = {
        "name": "probe",
        "skill": "slow_probe",
        "args": {"instance": "{labels.instance}"},
        "on_resolved": "stop",
    }
    token = make_trigger(served, "stopper", rule)
    started = deliver(served, "stopper", token, grouped(alert(fingerprint="s1"))).json()["started"]
    resolved = deliver(served, "stopper", token, grouped(alert("resolved", fingerprint="s1")))
    assert resolved.json()["resolved"] == 1, resolved.text
    execution = served.final(started[0]["target_id"], timeout=15)
    assert execution["status"] == "cancelled", execution
    assert recent(served, "stopper")[0]["resolved_at"] is not None


HOSTILE = {
    "huge": grouped(*[alert(fingerprint=f"h{n}") for n in range(500)]),
    "deep": {"alerts": [{"labels": {"a": "b"}, "annotations": json.loads("[" * 40 + "]" * 40)}]},
    "wrong type": grouped({**alert(), "labels": ["alertname", "HostDown"]}),
    "label not a string": grouped({**alert(), "labels": {"alertname": 7}}),
    "template in a label": grouped(alert(instance="{{ 7*7 }}")),
    "placeholder in a label": grouped(alert(instance="{labels.secret}")),
    "bad label name": grouped({**alert(), "labels": {"alert name": "x"}}),
    "unknown version": {**grouped(alert()), "version": "3"},
    "not an object": ["alerts"],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_payload_is_refused_and_starts_nothing(served: Served, kind: str) -> None:
    name = "hostile-" + kind.replace(" ", "-")
    token = make_trigger(served, name, DIAGNOSE)
    answer = deliver(served, name, token, HOSTILE[kind])
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    assert recent(served, name) == []


def test_a_body_that_is_not_json_or_too_deep_for_the_parser_is_refused(served: Served) -> None:
    token = make_trigger(served, "raw", DIAGNOSE)
    for raw in (b"{not json", b"[" * 100_000 + b"]" * 100_000):
        answer = httpx.post(
            f"{served.url}/v1/triggers/raw",
            content=raw,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 400, answer.text
    assert recent(served, "raw") == []


def test_a_rule_naming_a_label_the_alert_lacks_starts_nothing(served: Served) -> None:
    rule = {**DIAGNOSE, "args": {"instance": "{labels.pod}", "summary": "x"}}
    token = make_trigger(served, "missing", rule)
    answer = deliver(served, "missing", token, grouped(alert()))
    assert answer.status_code == 400 and "pod" in answer.text
    assert recent(served, "missing") == []


def test_triggers_are_changed_by_admins_only_and_listed_for_operators(served: Served) -> None:
    doc = {"rules": [DIAGNOSE]}
    assert served.http("PUT", "/v1/triggers/ops", "olga", json=doc).status_code == 403
    assert served.http("GET", "/v1/triggers", "vera").status_code == 403
    bad = served.http("PUT", "/v1/triggers/ops", json={"rules": [{**DIAGNOSE, "typo": 1}]})
    assert bad.status_code == 400 and "typo" in bad.text
    template = served.http(
        "PUT", "/v1/triggers/ops", json={"rules": [{**DIAGNOSE, "args": {"x": "{__import__}"}}]}
    )
    assert template.status_code == 400
    names = [t["name"] for t in served.http("GET", "/v1/triggers", "olga").json()["items"]]
    assert "ops" not in names
