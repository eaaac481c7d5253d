"""The manager's view of the hosts: online and offline, and the catalogue merged from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.fleet.catalogue import Hosts
from ongrid_skills.fleet.inventory import definition_hash, hosted, record_of, skills_digest
from ongrid_skills.skills.model import HOST_ARG, SCOPE_HOST
from ongrid_skills.skills.registry import Registry
from tests.support.skills import load, write_skill

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "additionalProperties": False,
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def entry(host: str, records: list[dict[str, Any]], **fields: Any) -> bytes:
    body = {
        "host": host,
        "instance": fields.pop("instance", "i-" + host),
        "pid": 1,
        "version": "0.1.0",
        "labels": {},
        "ttl": 2.0,
        "started_at": 1.0,
        "heartbeat_at": 2.0,
        "running": 0,
        "skills_digest": skills_digest(records),
        "skills": records,
        **fields,
    }
    return json.dumps(body).encode()


def records(
    tmp_path: Path, name: str = "clean_disk", body: str = "echo '{}'"
) -> list[dict[str, Any]]:
    root = tmp_path / f"{name}-{abs(hash(body))}"
    write_skill(root, name, f"#!/bin/sh\ncat >/dev/null\n{body}\n", scope="host", schema=SCHEMA)
    registry, _ = load(external=[root])
    return [record_of(s) for s in hosted(registry.skills.values())]


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_one_skill_on_two_hosts_is_offered_once_with_a_host_enum(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = Hosts(clock)
    same = records(tmp_path)
    hosts.apply("web-2", entry("web-2", same))
    hosts.apply("web-1", entry("web-1", same))
    skill = hosts.offers()["clean_disk"]
    assert skill.scope == SCOPE_HOST and skill.source == "host"
    assert skill.schema["properties"][HOST_ARG]["enum"] == ["web-1", "web-2"]
    assert skill.schema["required"] == [HOST_ARG]
    assert skill.schema["additionalProperties"] is False  # the host is a declared property
    assert skill.validate({"host": "web-1", "path": "/tmp"}) == []
    assert skill.validate({"host": "db-1", "path": "/tmp"}) != []
    assert skill.definition_hash == same[0]["definition_hash"]


def test_the_same_skill_deployed_in_two_places_has_one_definition_hash(tmp_path: Path) -> None:
    first, second = records(tmp_path / "a"), records(tmp_path / "b")
    assert first[0]["definition_hash"] == second[0]["definition_hash"]
    other = records(tmp_path / "c", body="echo '{\"edited\": true}'")
    assert other[0]["definition_hash"] != first[0]["definition_hash"]


def test_two_definitions_under_one_name_are_shown_never_merged(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = Hosts(clock)
    usual, edited = records(tmp_path), records(tmp_path, body="echo '{\"v\": 2}'")
    hosts.apply("a", entry("a", usual))
    hosts.apply("b", entry("b", usual))
    hosts.apply("c", entry("c", edited))
    skill = hosts.offers()["clean_disk"]
    assert skill.schema["properties"]["host"]["enum"] == ["a", "b"]  # the majority's definition
    placement = skill.summary()["placement"]
    assert placement["definitions"] == [
        {"definition_hash": usual[0]["definition_hash"], "hosts": ["a", "b"], "offered": True},
        {"definition_hash": edited[0]["definition_hash"], "hosts": ["c"], "offered": False},
    ]


def test_a_host_missing_its_heartbeat_goes_offline_and_leaves_the_enum(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = Hosts(clock)
    same = records(tmp_path)
    hosts.apply("a", entry("a", same))
    hosts.apply("b", entry("b", same, ttl=5.0))
    version = hosts.version
    clock.now += 3  # past a's TTL (2 s), within b's (5 s)
    assert hosts.expire() == ["a"]
    assert hosts.version > version
    assert hosts.online("a") is None and hosts.online("b") is not None
    assert hosts.offers()["clean_disk"].schema["properties"]["host"]["enum"] == ["b"]
    hosts.apply("a", entry("a", same))  # it comes back
    assert hosts.online("a") is not None


def test_a_plain_heartbeat_changes_nothing_offered(tmp_path: Path, clock: Clock) -> None:
    hosts = Hosts(clock)
    same = records(tmp_path)
    hosts.apply("a", entry("a", same))
    local = Registry({})
    merged = hosts.merge(local)
    changed, replaced = hosts.apply("a", entry("a", same, heartbeat_at=9.0, running=3))
    assert (changed, replaced) == (False, None)
    assert hosts.merge(local) is merged  # cached: no merge on a heartbeat


def test_the_merged_catalogue_keeps_what_the_local_registry_was_loaded_with(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = Hosts(clock)
    hosts.apply("a", entry("a", records(tmp_path)))
    local = Registry({}, config={"region": "eu"}, pack_roots=("/data/packs/ops/1.0.0",))
    merged = hosts.merge(local)
    assert "clean_disk" in merged.skills
    # The pack roots decide whether a pack change needs a reload: lost, it would reload always.
    assert merged.pack_roots == local.pack_roots
    assert merged.config == local.config and merged.personas == local.personas


def test_a_restart_under_the_same_host_id_is_reported(tmp_path: Path, clock: Clock) -> None:
    hosts = Hosts(clock)
    same = records(tmp_path)
    hosts.apply("a", entry("a", same, instance="first"))
    assert hosts.apply("a", entry("a", same, instance="second")) == (False, "first")


def test_grace_counts_from_the_manager_reconnection(tmp_path: Path, clock: Clock) -> None:
    hosts = Hosts(clock)
    hosts.apply("a", entry("a", records(tmp_path)))
    clock.now += 10  # the manager was cut off from the bus all this time
    hosts.grace()
    assert hosts.expire() == []


def test_a_deleted_entry_is_a_host_offline_at_once(tmp_path: Path, clock: Clock) -> None:
    hosts = Hosts(clock)
    hosts.apply("a", entry("a", records(tmp_path)))
    assert hosts.remove("a") is True
    assert hosts.online("a") is None
    assert hosts.offers()["clean_disk"].schema["properties"]["host"]["enum"] == []


def test_the_merge_drops_local_host_skills_and_keeps_the_managers_own_names(
    tmp_path: Path, clock: Clock
) -> None:
    local_root = tmp_path / "local"
    write_skill(local_root, "clean_disk", scope="host")  # runs on hosts, never on the manager
    write_skill(local_root, "probe", scope="manager")
    local, _ = load(external=[local_root])
    hosts = Hosts(clock)
    hosts.apply("a", entry("a", records(tmp_path) + records(tmp_path, name="probe")))
    merged = hosts.merge(local)
    assert merged.get("clean_disk").placement is not None
    assert merged.get("probe").placement is None  # the manager's own skill wins


@pytest.mark.parametrize(
    ("key", "body"),
    [
        ("a", b"not json"),
        ("a", b"[]"),
        ("a", entry("b", [])),  # a host entry under another key
        ("a", entry("a", [{"name": "x"}])),
        ("a", entry("a", [{"name": "../x", "definition_hash": "0" * 64}])),
        ("a", entry("a", [], labels=["x"])),
        ("a", entry("a", [], pid="1")),
        ("a b", entry("a b", [])),
    ],
)
def test_malformed_entries_are_ignored(key: str, body: bytes, clock: Clock) -> None:
    hosts = Hosts(clock)
    assert hosts.apply(key, body) == (False, None)
    assert hosts.hosts == {}


def test_a_record_with_a_bad_schema_is_refused(tmp_path: Path, clock: Clock) -> None:
    bad = records(tmp_path)
    bad[0]["schema"] = {"type": "array"}
    bad[0]["definition_hash"] = "b" * 64
    assert Hosts(clock).apply("a", entry("a", bad)) == (False, None)


def test_definition_hash_ignores_where_the_files_are(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two" / "deeper"
    for root in (one, two):
        write_skill(root, "clean_disk", scope="host")
    a = load(external=[one])[0].get("clean_disk")
    b = load(external=[two])[0].get("clean_disk")
    assert a.definition_hash != b.definition_hash  # the manager's own hash knows the paths
    assert definition_hash(a) == definition_hash(b)


def test_a_call_to_an_offline_unknown_or_differing_host_is_refused_before_sending(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = Hosts(clock)
    usual, edited = records(tmp_path), records(tmp_path, body="echo '{\"v\": 2}'")
    hosts.apply("a", entry("a", usual))
    hosts.apply("b", entry("b", usual))
    hosts.apply("c", entry("c", edited))
    skill = hosts.offers()["clean_disk"]
    assert hosts.problem(skill, {"host": "a"}) is None
    differs = hosts.problem(skill, {"host": "c"})
    assert differs is not None and differs.code == "definition_changed"
    unknown = hosts.problem(skill, {"host": "z"})
    assert unknown is not None and unknown.code == "host_offline"
    hosts.remove("a")
    offline = hosts.problem(skill, {"host": "a"})
    assert offline is not None and offline.code == "host_offline"
    assert "is offline (last heartbeat at" in offline.message
