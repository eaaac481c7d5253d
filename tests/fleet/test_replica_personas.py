"""Personas written at run time on replicas of one PostgreSQL database: an edit made through
one replica is what the others serve within a couple of seconds (the generation record), for
their REST reads and their gate alike."""

from __future__ import annotations

from typing import Any

from tests.support.replicas import Replica, ReplicaSet
from tests.support.skills import MakeSkill
from tests.support.waiting import wait_for

NIGHT = {
    "name": "night_watch",
    "description": "Watches the night shift.",
    "when_to_use": "At night.",
    "permission_mode": "read-only",
}


def mode_on(replica: Replica) -> str | None:
    answer = replica.call("GET", "/v1/personas/night_watch", "vera")
    body: dict[str, Any] = answer.json()
    return body["permission_mode"] if answer.status_code == 200 else None


def test_an_edit_through_one_replica_is_served_by_the_other(
    replicas: ReplicaSet, make_skill: MakeSkill
) -> None:
    make_skill("disk_clean", "#!/bin/sh\ncat >/dev/null\necho '{}'\n", **{"class": "mutating"})
    first, second = replicas.start_all("a", "b")
    assert mode_on(second) is None  # looked once: nothing stored yet
    assert first.call("POST", "/v1/personas", json=NIGHT).status_code == 201
    wait_for(lambda: mode_on(second) == "read-only", "replica b to serve the new persona", 10)
    call = {"args": {}, "persona": "night_watch", "confirm": True}
    refused = second.call("POST", "/v1/skills/disk_clean/execute", "olga", json=call)
    assert refused.status_code == 403, refused.text

    edit = {**NIGHT, "permission_mode": "mutating-with-confirm"}
    assert second.call("PUT", "/v1/personas/night_watch", json=edit).status_code == 200
    wait_for(lambda: mode_on(first) == "mutating-with-confirm", "replica a to see the edit", 10)
    ran = first.call("POST", "/v1/skills/disk_clean/execute", "olga", json=call)
    assert ran.status_code == 200, ran.text
    assert ran.json()["status"] == "succeeded"

    assert first.call("DELETE", "/v1/personas/night_watch").status_code == 204
    wait_for(lambda: mode_on(second) is None, "replica b to drop the deleted persona", 10)
