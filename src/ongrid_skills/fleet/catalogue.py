"""The manager's view of the fleet: which hosts are online, and the catalogue merged from them.

:class:`Hosts` is fed the entries of the hosts bucket as they change (:meth:`Hosts.apply`,
:meth:`Hosts.remove`) and the passing of time (:meth:`Hosts.expire`). A host is online while its
heartbeats arrive; one that misses them for its TTL (by this manager's monotonic clock, counted
only while this manager is connected to the bus: see :meth:`Hosts.grace`) or whose entry was
deleted (a clean stop) is offline, and stays listed as such.

An entry is believed only when a key trusted for its host id signed it (:mod:`.attest`) and it
claims that host id: anything else — unsigned, signed by another key, a bad signature, a record
whose hash does not cover it — makes the host *unverified*: listed with the reason, holding no
skill, never offered, never sent a call, never counted as a restart of the host, and forgotten one
TTL (this manager's) after such entries stop. Each host's records are its own: nothing is cached
across hosts, so one host's entry cannot speak for another.

The catalogue (:meth:`Hosts.merge`) is the manager's own skills plus one skill per name that
online workers announce with ``scope: host``. Its schema gets a required ``host`` argument, an
enum of the online hosts holding the definition offered. When hosts announce different
definitions under one name, the definition held by the most online hosts is offered (ties: the
smallest hash) and every definition is listed in the skill's ``placement`` with its hosts: the
hosts of another definition are not in the enum, and nothing is silently merged. A name with no
online host stays listed (its enum empty) while a host that had it is known: a call to an
offline host fails ``host_offline``.

The manager's own host-scoped skills are not offered when a fleet is configured: host skills
run on hosts. A worker skill named like one of the manager's own skills is not offered either
(the manager's wins) and is reported once in the log.

Merging is redone only when the set of online hosts or a host's skills change, never on a plain
heartbeat, and then only for the names the changed host holds; the merged registry is cached
per (local registry, version) and keeps the serialised summaries of the skills that did not
change. This module never
speaks to the bus and never runs a call.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

from ongrid_skills.execution.records import ErrorInfo
from ongrid_skills.fleet.attest import WorkerKeys, open_entry
from ongrid_skills.fleet.inventory import Announcement, BadEntry, SkillRecord, parse, parse_skills
from ongrid_skills.skills.model import HOST_ARG, SCOPE_HOST, Placement, Skill
from ongrid_skills.skills.registry import Registry

LOG = logging.getLogger("ongrid_skills.fleet")
P = ParamSpec("P")
R = TypeVar("R")
#: Offline hosts are forgotten after this long (seconds).
FORGET_SECONDS = 7 * 24 * 3600


def _locked(method: Callable[Concatenate[Hosts, P], R]) -> Callable[Concatenate[Hosts, P], R]:
    """One caller at a time: the bus feeds the hosts in the event loop while a request handler
    in a worker thread may read the catalogue (a merge half done must never be cached)."""

    def locked(hosts: Hosts, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with hosts._lock:
            return method(hosts, *args, **kwargs)

    functools.update_wrapper(locked, method)
    return locked


@dataclass(slots=True)
class HostState:
    """What this manager knows of one host (``host``: its key in the bucket)."""

    host: str
    announcement: Announcement
    skills: dict[str, SkillRecord]
    seen: float  # this manager's monotonic clock at its last heartbeat
    online: bool = True
    went_offline: float | None = None
    unverified: str | None = None  # why its last entry is not believed; None: verified
    verified_instance: str | None = None  # the instance of its last verified entry

    def to_dict(self, running_here: int) -> dict[str, Any]:
        a = self.announcement
        believed = self.unverified is None
        return {
            "host": self.host,
            "online": self.online and believed,
            "verified": believed,
            "unverified": self.unverified,
            "last_heartbeat": a.heartbeat_at,
            "labels": a.labels,
            "version": a.version,
            "instance": a.instance,
            "pid": a.pid,
            "started_at": a.started_at,
            "ttl_seconds": a.ttl,
            "skill_count": len(self.skills),
            "skills": {name: r.definition_hash for name, r in sorted(self.skills.items())},
            "running_calls": a.running if self.online and believed else 0,
            "running_calls_here": running_here,
        }


@dataclass
class Hosts:
    """The hosts of the fleet as this manager sees them, and the merged catalogue.

    ``keys``: the worker keys trusted (replaced when their file changes); ``ttl``: this
    manager's TTL, how long an unverified host is listed after its last entry."""

    clock: Callable[[], float]
    keys: WorkerKeys = field(default_factory=WorkerKeys)
    ttl: float = 15.0
    hosts: dict[str, HostState] = field(default_factory=dict)
    version: int = 0  # bumped whenever the offers change
    _holders: dict[str, set[str]] = field(default_factory=dict)  # skill name → hosts
    _offers: dict[str, Skill] = field(default_factory=dict)
    _dirty: set[str] = field(default_factory=set)  # names whose offer must be rebuilt
    _merged: tuple[Registry, int, Registry] | None = None
    _shadowed: set[str] = field(default_factory=set)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # ---- feeding ---------------------------------------------------------------------------
    @_locked
    def apply(self, key: str, value: bytes) -> tuple[bool, str | None]:
        """A host's entry was written: (whether the offers or the hosts listed changed, the
        instance it replaced when the worker restarted under the same host id). A malformed
        entry is logged and ignored; an unverified one is listed as such."""
        opened = open_entry(value, key, self.keys)
        try:
            announcement = parse(opened.inventory, key)
        except BadEntry as exc:
            LOG.warning("hosts bucket: entry %r ignored: %s", key[:128], exc)
            return False, None
        if opened.problem is not None:
            return self._unverified(key, announcement, opened.problem), None
        if announcement.host != key:
            claim = f"the entry claims host {announcement.host!r}: a host speaks for itself only"
            return self._unverified(key, announcement, claim), None
        now = self.clock()
        state = self.hosts.get(key)
        if _replayed(state, announcement):
            LOG.warning(
                "hosts bucket: entry %r ignored: an older instance of the host (started at %s) "
                "while instance %s runs: a replayed entry",
                key, _iso(announcement.started_at), state.verified_instance if state else None,
            )  # fmt: skip
            return False, None
        if (
            state is not None
            and state.unverified is None
            and state.announcement.skills_digest == announcement.skills_digest
        ):  # a plain heartbeat, verified as the entry before it: its skills are those checked
            replaced = state.announcement.instance
            state.announcement = announcement
            state.seen = now
            state.verified_instance = announcement.instance
            came_back = not state.online
            state.online, state.went_offline = True, None
            if came_back:
                self._changed(state.skills)
            return came_back, replaced if replaced != announcement.instance else None
        try:
            records = parse_skills(announcement.raw_skills)
        except BadEntry as exc:
            return self._unverified(key, announcement, f"malformed: {exc}"), None
        announcement.raw_skills = []
        before = state.verified_instance if state is not None else None
        fresh = HostState(key, announcement, {r.name: r for r in records}, now)
        fresh.verified_instance = announcement.instance
        if state is not None:
            if state.unverified is not None:
                LOG.warning("hosts bucket: host %s is verified again", key)
            self._unhold(key, state.skills)
        for name in fresh.skills:
            self._holders.setdefault(name, set()).add(key)
        self.hosts[key] = fresh
        self._changed(fresh.skills, state.skills if state is not None else ())
        return True, before if before not in (None, announcement.instance) else None

    def _unverified(self, key: str, announcement: Announcement, why: str) -> bool:
        """An entry that is not believed: the host is listed with the reason, holds nothing."""
        announcement.raw_skills = []
        state = self.hosts.get(key)
        if state is None or state.unverified != why:
            LOG.warning(
                "hosts bucket: entry %r not verified, its skills are not offered: %s", key, why
            )
        fresh = HostState(key, announcement, {}, self.clock(), unverified=why)
        if state is not None:
            fresh.verified_instance = state.verified_instance
            self._unhold(key, state.skills)
            self._changed(state.skills)
        self.hosts[key] = fresh
        return state is None or state.unverified is None

    @_locked
    def remove(self, key: str) -> bool:
        """A host's entry was deleted (the worker stopped cleanly): it is offline now."""
        state = self.hosts.get(key)
        if state is None or not state.online:
            return False
        self._offline(state, self.clock())
        return True

    @_locked
    def expire(self) -> list[str]:
        """Hosts whose heartbeat is older than their TTL go offline; return them (unverified
        hosts are forgotten one TTL of this manager after their last entry)."""
        now = self.clock()
        gone = []
        for state in self.hosts.values():
            late = now - state.seen > state.announcement.ttl
            if state.unverified is None and state.online and late:
                self._offline(state, now)
                gone.append(state.host)
        stale = [k for k, s in self.hosts.items() if _forgotten(s, now, self.ttl)]
        for key in stale:
            state = self.hosts.pop(key)
            self._unhold(key, state.skills)
            self._changed(state.skills)
        if stale:
            self.version += 1
        return gone

    @_locked
    def grace(self) -> None:
        """After this manager was cut off from the bus: a host counts from now, not from its
        last heartbeat heard (heartbeats missed while *we* were away prove nothing)."""
        now = self.clock()
        for state in self.hosts.values():
            if state.online:
                state.seen = max(state.seen, now)

    def _offline(self, state: HostState, now: float) -> None:
        state.online, state.went_offline = False, now
        self._changed(state.skills)

    def _unhold(self, host: str, names: Iterable[str]) -> None:
        for name in names:
            holders = self._holders.get(name)
            if holders is not None:
                holders.discard(host)
                if not holders:
                    del self._holders[name]

    def _changed(self, *names: Iterable[str]) -> None:
        """The offers of these names must be rebuilt (only these: a host joining a fleet of
        thousands of skills rebuilds its own few)."""
        self.version += 1
        for group in names:
            self._dirty.update(group)

    # ---- reading ---------------------------------------------------------------------------
    def online(self, host: str) -> HostState | None:
        """The host, if it is online and verified."""
        state = self.hosts.get(host)
        ok = state is not None and state.online and state.unverified is None
        return state if ok else None

    @_locked
    def problem(self, skill: Skill, args: Any) -> ErrorInfo | None:
        """Why a call of this host skill cannot go where its args say, or None."""
        host = args.get(HOST_ARG) if isinstance(args, dict) else None
        if not isinstance(host, str):
            return None  # the schema refuses it (host is required)
        state = self.online(host)
        if state is None:
            known = self.hosts.get(host)
            if known is None:
                return ErrorInfo("host_offline", f"no online host {host[:128]!r} is known")
            if known.unverified is not None:
                return ErrorInfo(
                    "host_unverified",
                    f"host {host}'s entry is not verified ({known.unverified}): "
                    "the call was not sent",
                )
            since = known.announcement.heartbeat_at
            return ErrorInfo(
                "host_offline",
                f"host {host} is offline (last heartbeat at {_iso(since)}): the call was not sent",
            )
        record = state.skills.get(skill.name)
        if record is None:
            return ErrorInfo("definition_changed", f"host {host} no longer has {skill.name}")
        if record.definition_hash != skill.definition_hash:
            return ErrorInfo(
                "definition_changed",
                f"{skill.name} on host {host} is not the definition this call was admitted "
                "with (another definition, or changed since): not sent",
            )
        return None

    @_locked
    def offers(self) -> dict[str, Skill]:
        """One skill per name the hosts announce (see the module docstring)."""
        for name in self._dirty:
            holders = self._holders.get(name)
            if holders:
                self._offers[name] = _offer(name, [self.hosts[h] for h in sorted(holders)])
            else:
                self._offers.pop(name, None)
        self._dirty.clear()
        return self._offers

    @_locked
    def merge(self, local: Registry) -> Registry:
        """``local`` without its host skills, plus the offers; cached until either changes."""
        cached = self._merged
        if cached is not None and cached[0] is local and cached[1] == self.version:
            return cached[2]
        skills = {n: s for n, s in local.skills.items() if s.scope != SCOPE_HOST}
        for name, skill in self.offers().items():
            if name in skills:
                if name not in self._shadowed:
                    self._shadowed.add(name)
                    LOG.warning("host skill %s not offered: the manager has a skill so named", name)
                continue
            skills[name] = skill
        previous = cached[2] if cached is not None else None
        merged = local.with_skills(skills, inherit=previous)
        self._merged = (local, self.version, merged)
        return merged


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _replayed(state: HostState | None, fresh: Announcement) -> bool:
    """A signed entry of an instance of the host older than the one online: a copy replayed
    (it would make the manager think the host restarted, and end the calls it runs). Once the
    running instance misses its heartbeats, any instance is taken (a clock set back between
    two starts delays a restart by one TTL at most)."""
    if state is None or state.unverified is not None or not state.online:
        return False
    current = state.announcement
    return fresh.instance != current.instance and fresh.started_at < current.started_at


def _forgotten(state: HostState, now: float, ttl: float) -> bool:
    if state.unverified is not None:
        return now - state.seen > ttl
    return state.went_offline is not None and now - state.went_offline > FORGET_SECONDS


def _offer(name: str, holders: list[HostState]) -> Skill:
    """The offer of one name from the hosts that announce it (sorted by host id)."""
    variants: dict[str, tuple[list[str], list[str]]] = {}  # hash → (online, all)
    records: dict[str, SkillRecord] = {}
    for state in holders:
        record = state.skills[name]
        # One hash, one record: a record's hash covers all of it (checked when it was read).
        records.setdefault(record.definition_hash, record)
        online, known = variants.setdefault(record.definition_hash, ([], []))
        known.append(state.host)
        if state.online:
            online.append(state.host)
    ranked = sorted(variants.items(), key=lambda v: (-len(v[1][0]), -len(v[1][1]), v[0]))
    offered, (online, known) = ranked[0]
    placement = Placement(
        definition_hash=offered,
        hosts=tuple(online),
        variants=tuple((digest, tuple(both[1])) for digest, both in ranked),
        credentials=records[offered].credentials,
    )
    return _skill(records[offered], placement, known)


def _skill(record: SkillRecord, placement: Placement, known: list[str]) -> Skill:
    # Available even with no host online (an empty enum): a call naming an offline host then
    # fails host_offline, which says more than the gate's "unavailable" would.
    return Skill(
        name=record.name,
        description=record.description,
        skill_class=record.skill_class,
        category=record.category,
        kind=record.kind,
        source="host",
        schema=with_host(record.schema, placement.hosts),
        timeout_seconds=record.timeout_seconds,
        when_to_use=record.when_to_use,
        confirmation_required=record.confirmation_required,
        origin=f"host:{known[0]}",
        scope=SCOPE_HOST,
        placement=placement,
        sandbox=record.sandbox,
        preview=record.preview,
    )


def with_host(schema: dict[str, Any], hosts: tuple[str, ...]) -> dict[str, Any]:
    """The schema plus the required ``host`` argument: one of ``hosts``.

    >>> with_host({"type": "object", "properties": {}}, ("a",))["required"]
    ['host']
    """
    out = dict(schema)
    properties = dict(out.get("properties") or {})
    properties[HOST_ARG] = {
        "type": "string",
        "enum": list(hosts),
        "description": "The host this call runs on: one of the online hosts that have the skill.",
    }
    out["properties"] = properties
    required = [r for r in out.get("required") or [] if r != HOST_ARG]
    out["required"] = [*required, HOST_ARG]
    out.setdefault("type", "object")
    return out
