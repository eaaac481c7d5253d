"""The manager's view of the hosts: online and offline, and the catalogue merged from them."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.fleet.attest import key_line, parse_worker_keys, seal, worker_key
from ongrid_skills.fleet.catalogue import Hosts
from ongrid_skills.fleet.inventory import (
    definition_hash,
    hash_of,
    hosted,
    record_of,
    skills_digest,
)
from ongrid_skills.packs.keys import SigningKey
from ongrid_skills.settings import Settings
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


#: The hosts these tests announce, each with a key of its own that the manager trusts for it.
HOSTS = ("a", "b", "c", "web-1", "web-2")


@pytest.fixture(scope="module")
def host_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SigningKey]:
    root = tmp_path_factory.mktemp("worker-keys")
    return {h: worker_key(Settings(data_dir=str(root / h))) for h in HOSTS}


@pytest.fixture(autouse=True)
def _keys(host_keys: dict[str, SigningKey]) -> None:
    KEYS.clear()
    KEYS.update(host_keys)


KEYS: dict[str, SigningKey] = {}


def fleet_view(clock: Clock) -> Hosts:
    """The hosts as a manager trusting each host's key sees them."""
    lines = "\n".join(key_line(h, k) for h, k in KEYS.items())
    return Hosts(clock, parse_worker_keys(lines, "workers.pub"))


def entry(host: str, records: list[dict[str, Any]], **fields: Any) -> bytes:
    """``host``'s entry, signed with its key (``signer``: another host's key)."""
    signer = KEYS[fields.pop("signer", host)]
    return seal(signer, inventory(host, records, **fields))


def inventory(host: str, records: list[dict[str, Any]], **fields: Any) -> bytes:
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


def seal_later(host: str, **fields: Any) -> Any:
    """An entry signed once the keys exist (parametrize runs before the fixtures)."""
    return lambda: seal(KEYS["a"], inventory(host, [], **fields))


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
    hosts = fleet_view(clock)
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
    hosts = fleet_view(clock)
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
    hosts = fleet_view(clock)
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
    hosts = fleet_view(clock)
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
    hosts = fleet_view(clock)
    hosts.apply("a", entry("a", records(tmp_path)))
    local = Registry({}, config={"region": "eu"}, pack_roots=("/data/packs/ops/1.0.0",))
    merged = hosts.merge(local)
    assert "clean_disk" in merged.skills
    # The pack roots decide whether a pack change needs a reload: lost, it would reload always.
    assert merged.pack_roots == local.pack_roots
    assert merged.config == local.config and merged.personas == local.personas


def test_a_restart_under_the_same_host_id_is_reported(tmp_path: Path, clock: Clock) -> None:
    hosts = fleet_view(clock)
    same = records(tmp_path)
    hosts.apply("a", entry("a", same, instance="first"))
    assert hosts.apply("a", entry("a", same, instance="second")) == (False, "first")


def test_grace_counts_from_the_manager_reconnection(tmp_path: Path, clock: Clock) -> None:
    hosts = fleet_view(clock)
    hosts.apply("a", entry("a", records(tmp_path)))
    clock.now += 10  # the manager was cut off from the bus all this time
    hosts.grace()
    assert hosts.expire() == []


def test_a_deleted_entry_is_a_host_offline_at_once(tmp_path: Path, clock: Clock) -> None:
    hosts = fleet_view(clock)
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
    hosts = fleet_view(clock)
    hosts.apply("a", entry("a", records(tmp_path) + records(tmp_path, name="probe")))
    merged = hosts.merge(local)
    assert merged.get("clean_disk").placement is not None
    assert merged.get("probe").placement is None  # the manager's own skill wins


@pytest.mark.parametrize(
    ("key", "body"),
    [
        ("a", b"not json"),
        ("a", b"[]"),
        ("a", seal_later("a", labels=["x"])),
        ("a", seal_later("a", pid="1")),
        ("a b", seal_later("a b")),
    ],
)
def test_malformed_entries_are_ignored(key: str, body: Any, clock: Clock) -> None:
    hosts = fleet_view(clock)
    value = body() if callable(body) else body
    assert hosts.apply(key, value) == (False, None)
    assert hosts.hosts == {}


def test_a_record_with_a_bad_schema_makes_its_host_unverified(tmp_path: Path, clock: Clock) -> None:
    bad = records(tmp_path)
    bad[0]["schema"] = {"type": "array"}
    hosts = fleet_view(clock)
    assert hosts.apply("a", entry("a", bad)) == (True, None)
    assert hosts.online("a") is None and hosts.offers() == {}
    unverified = hosts.hosts["a"].unverified
    assert unverified is not None and unverified.startswith("malformed: skill clean_disk")


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
    hosts = fleet_view(clock)
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


def test_an_unsigned_entry_is_listed_unverified_and_offers_nothing(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = fleet_view(clock)
    assert hosts.apply("a", inventory("a", records(tmp_path))) == (True, None)
    view = hosts.hosts["a"].to_dict(0)
    assert view["verified"] is False and view["online"] is False
    assert view["unverified"].startswith("unsigned")
    assert view["skills"] == {} and view["skill_count"] == 0
    assert hosts.offers() == {} and hosts.online("a") is None


def test_an_entry_signed_by_another_hosts_key_is_unverified(tmp_path: Path, clock: Clock) -> None:
    hosts = fleet_view(clock)
    hosts.apply("a", entry("a", records(tmp_path), signer="b"))
    assert hosts.hosts["a"].unverified == (
        f"signed by {KEYS['b'].fingerprint}, not a key trusted for host a"
    )
    assert hosts.offers() == {}


def test_a_signed_entry_claiming_another_host_is_unverified(tmp_path: Path, clock: Clock) -> None:
    hosts = fleet_view(clock)
    hosts.apply("a", entry("b", records(tmp_path), signer="a"))
    unverified = hosts.hosts["a"].unverified
    assert unverified is not None and "claims host 'b'" in unverified
    assert "b" not in hosts.hosts and hosts.offers() == {}


def test_a_changed_byte_breaks_an_entrys_signature(tmp_path: Path, clock: Clock) -> None:
    hosts = fleet_view(clock)
    genuine = json.loads(entry("a", records(tmp_path)))
    tampered = genuine["inventory"].replace('"pid": 1,', '"pid": 2,')
    assert tampered != genuine["inventory"]
    genuine["inventory"] = tampered
    hosts.apply("a", json.dumps(genuine).encode())
    unverified = hosts.hosts["a"].unverified
    assert unverified is not None and unverified.startswith("bad signature")


def test_one_hosts_record_never_speaks_for_another(tmp_path: Path, clock: Clock) -> None:
    hosts = fleet_view(clock)
    dangerous = records(tmp_path, name="wipe")
    dangerous[0]["class"] = "dangerous"
    dangerous[0]["definition_hash"] = hash_of(dangerous[0])
    # a (trusted, but lying) announces b's definition hash with the class safe, and first.
    lying = [{**dangerous[0], "class": "safe"}]
    hosts.apply("a", entry("a", lying))
    hosts.apply("b", entry("b", dangerous))
    skill = hosts.offers()["wipe"]
    assert skill.skill_class.value == "dangerous"
    assert skill.schema["properties"][HOST_ARG]["enum"] == ["b"]
    unverified = hosts.hosts["a"].unverified
    assert unverified is not None and "does not cover the definition announced" in unverified


def test_without_worker_keys_no_host_is_believed(tmp_path: Path, clock: Clock) -> None:
    hosts = Hosts(clock)
    hosts.apply("a", entry("a", records(tmp_path)))
    assert hosts.hosts["a"].unverified == (
        "no worker key is trusted: ONGRID_FLEET_WORKER_KEYS is not set"
    )
    assert hosts.offers() == {}


def test_an_unverified_entry_under_a_hosts_key_withdraws_its_skills_until_its_next_heartbeat(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = fleet_view(clock)
    same = records(tmp_path)
    hosts.apply("a", entry("a", same, instance="real"))
    offered = hosts.offers()["clean_disk"]
    forged = inventory("a", [{**same[0], "class": "safe"}], instance="forged")
    assert hosts.apply("a", forged) == (True, None)  # never reported as a restart
    assert "clean_disk" not in hosts.offers()
    problem = hosts.problem(offered, {"host": "a"})  # a call admitted before it
    assert problem is not None and problem.code == "host_unverified"
    assert hosts.apply("a", entry("a", same, instance="real")) == (True, None)  # not a restart
    assert hosts.offers()["clean_disk"].schema["properties"][HOST_ARG]["enum"] == ["a"]


def test_an_unverified_host_is_forgotten_one_ttl_after_its_last_entry(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = fleet_view(clock)
    hosts.apply("forged", inventory("forged", records(tmp_path), ttl=1e9))
    clock.now += hosts.ttl + 1  # the manager's TTL, not the one the entry claims
    hosts.expire()
    assert "forged" not in hosts.hosts


def test_a_replayed_entry_of_an_older_instance_is_not_taken_for_a_restart(
    tmp_path: Path, clock: Clock
) -> None:
    hosts = fleet_view(clock)
    same = records(tmp_path)
    old = entry("a", same, instance="old", started_at=1.0)
    hosts.apply("a", old)
    assert hosts.apply("a", entry("a", same, instance="new", started_at=5.0)) == (False, "old")
    assert hosts.apply("a", old) == (False, None)  # the old instance's entry, copied back
    assert hosts.hosts["a"].announcement.instance == "new"
    clock.now += 3  # the new instance misses its heartbeats: whatever comes next is taken
    hosts.expire()
    assert hosts.apply("a", old)[0] is True and hosts.online("a") is not None


def test_the_catalogue_read_from_another_thread_while_hosts_arrive_is_never_half_merged(
    tmp_path: Path, clock: Clock
) -> None:
    # The bus feeds the hosts in the event loop; a request handler in a worker thread may read
    # the catalogue meanwhile. Every host's own skill must be in the catalogue at the end.
    hosts = fleet_view(clock)
    local = Registry({})
    names = [f"skill_{n:03d}" for n in range(60)]
    one = {name: records(tmp_path, name=name)[0] for name in names}
    entries = [
        (host, entry(host, [one[name] for name in names[i :: len(HOSTS)]]))
        for i, host in enumerate(HOSTS)
    ]
    failures: list[BaseException] = []
    done = threading.Event()

    def feed() -> None:
        try:
            for _ in range(100):
                for host, value in entries:
                    hosts.remove(host)
                    hosts.apply(host, value)
        except BaseException as exc:
            failures.append(exc)
        finally:
            done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can: races show
    try:
        feeder = threading.Thread(target=feed)
        feeder.start()
        while not done.is_set():
            try:
                hosts.merge(local)
            except BaseException as exc:
                failures.append(exc)
                break
        feeder.join(30)
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
    assert sorted(hosts.merge(local).skills) == names
