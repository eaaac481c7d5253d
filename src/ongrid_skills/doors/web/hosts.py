"""The hosts pages: ``/hosts`` (the edge workers this manager sees, live), a host's page
``/hosts/{host}`` (its skills and their definitions, the calls handed to it), and the list's
event stream ``/hosts/events``.

The rule is ``GET /v1/hosts``'s: any logged-in principal may read them, and they show the same
view (``Fleet.hosts_view``). Without a fleet (``ONGRID_NATS_URL`` unset) they say so and how to
set one up, never an error page. They only read: nothing here speaks to the bus or changes a
record.

The stream sends the hosts table, rendered, whenever the view changes: at once when a host comes
online or goes offline (the manager tells its listeners, as it tells MCP), and otherwise at each
check of the session, every :data:`CHECK_SECONDS` (a plain heartbeat changes the last heartbeat
and the running calls, and wakes nobody). Once the session is over the stream says ``end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from jinja2 import Environment
from sse_starlette.sse import EventSourceResponse
from starlette.responses import Response

from ongrid_skills.doors.web.sessions import SESSION_COOKIE, Session, manager_of, settings_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import NotFound
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import SCOPE_HOST, Skill
from ongrid_skills.skills.registry import Registry

router = APIRouter()

#: Seconds between the stream's checks of the session (and of the view) while nothing happens.
CHECK_SECONDS = 5.0
#: Seconds between the comment lines that keep an idle stream open through proxies.
HEARTBEAT_SECONDS = 15.0
#: Calls handed to a host that its page lists (the history page has them all).
RECENT_CALLS = 20
HostId = Annotated[str, Path(min_length=1, max_length=128)]


@dataclass(frozen=True, slots=True)
class HostSkill:
    """One skill a host announces, and how the catalogue offers its name."""

    name: str
    skill_class: str
    definition_hash: str
    #: "same": one definition everywhere; "offered": this host's is offered, others exist;
    #: "other": another definition is offered (calls cannot go here); "shadowed": the
    #: manager has a skill so named; "none": nothing offered under the name.
    state: str
    #: The other definitions under the name: (hash, hosts).
    others: tuple[tuple[str, tuple[str, ...]], ...]


@router.get("/hosts")
async def hosts_page(request: Request, _session: Session) -> Response:
    manager = manager_of(request)
    return render(
        request,
        "hosts.html",
        section="hosts",
        title="Hosts",
        fleet=fleet_facts(manager),
        hosts=hosts_view(manager),
        now=time.time(),
    )


@router.get("/hosts/events")
async def hosts_events(request: Request, _session: Session) -> EventSourceResponse:
    """The hosts table, live (see the module docstring)."""
    return EventSourceResponse(_stream(request), ping=HEARTBEAT_SECONDS)


@router.get("/hosts/{host}")
async def host_page(request: Request, host: HostId, _session: Session) -> Response:
    manager = manager_of(request)
    fleet = fleet_facts(manager)
    if fleet is None:
        return render(request, "hosts.html", section="hosts", title="Hosts", fleet=None, hosts=[])
    view = next((h for h in hosts_view(manager) if h["host"] == host), None)
    if view is None:
        raise NotFound(f"no host {host!r} is known to this manager")
    calls, more = manager.store.executions.page(host=host, limit=RECENT_CALLS)
    return render(
        request,
        "host.html",
        section="hosts",
        title=f"Host {host}",
        fleet=fleet,
        host=view,
        skills=host_skills(manager, host),
        calls=calls,
        more_calls=more is not None,
        now=time.time(),
    )


def fleet_facts(manager: Manager) -> dict[str, Any] | None:
    """What ``GET /v1/hosts`` says of the fleet (None: no fleet), and whether it is connected."""
    fleet = manager.fleet
    if fleet is None:
        return None
    return {
        "prefix": fleet.names.prefix,
        "ttl_seconds": fleet.ttl,
        "manager": fleet.id,
        "connected": fleet.connected,
    }


def hosts_view(manager: Manager) -> list[dict[str, Any]]:
    """Every host this manager knows, online first (``GET /v1/hosts``'s items, times as
    UNIX seconds)."""
    return manager.fleet.hosts_view() if manager.fleet is not None else []


def host_skills(manager: Manager, host: str) -> list[HostSkill]:
    """The skills ``host`` announces, each with what the catalogue does with its name."""
    fleet = manager.fleet
    state = fleet.hosts.hosts.get(host) if fleet is not None else None
    if state is None:
        return []
    registry = manager.registry
    return [
        _host_skill(registry, name, record.skill_class.value, record.definition_hash)
        for name, record in sorted(state.skills.items())
    ]


def _host_skill(registry: Registry, name: str, cls: str, digest: str) -> HostSkill:
    offered = registry.skills.get(name)
    if offered is None:
        return HostSkill(name, cls, digest, "none", ())
    if offered.placement is None or offered.scope != SCOPE_HOST:
        return HostSkill(name, cls, digest, "shadowed", ())
    others = tuple((h, tuple(hs)) for h, hs in offered.placement.variants if h != digest)
    if not others:
        return HostSkill(name, cls, digest, "same", ())
    ours = offered.placement.definition_hash == digest
    return HostSkill(name, cls, digest, "offered" if ours else "other", others)


@dataclass(frozen=True, slots=True)
class Offer:
    """Where a host skill runs, for its page: each definition with its hosts and their state."""

    definition_hash: str
    offered: bool
    hosts: tuple[tuple[str, bool], ...]  # (host, online)


def offers_of(manager: Manager, skill: Skill) -> list[Offer]:
    """The definitions of a host skill (the offered one first) and the hosts holding each."""
    fleet = manager.fleet
    if skill.placement is None or fleet is None:
        return []
    offered = skill.placement.definition_hash
    return [
        Offer(digest, digest == offered, tuple((h, fleet.hosts.online(h) is not None) for h in hs))
        for digest, hs in skill.placement.variants
    ]


def table_html(env: Environment, hosts: list[dict[str, Any]], now: float) -> str:
    return env.get_template("_hosts_table.html").render(hosts=hosts, now=now)


async def _stream(request: Request) -> AsyncIterator[dict[str, Any]]:
    manager = manager_of(request)
    env: Environment = request.app.state.templates
    session_id = request.cookies.get(SESSION_COOKIE, "")
    idle = settings_of(request).web_session_idle_seconds
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()

    def heard(_registry: Registry) -> None:
        # Listeners may be called from another thread (a reload): wake the loop safely.
        loop.call_soon_threadsafe(changed.set)

    manager.reload_listeners.append(heard)
    try:
        sent: list[dict[str, Any]] | None = None
        while True:
            view = hosts_view(manager)
            if view != sent:
                sent, now = view, time.time()
                online = sum(1 for h in view if h["online"])
                body = {
                    "html": table_html(env, view, now),
                    "now": now,
                    "online": online,
                    "hosts": {h["host"]: h["online"] for h in view},
                }
                yield {"event": "hosts", "data": json.dumps(body)}
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), CHECK_SECONDS)
            if manager.store.sessions.find(session_id, idle=idle, touch=False) is None:
                yield {"event": "end", "data": json.dumps({"reason": "the session has ended"})}
                return
    finally:
        with contextlib.suppress(ValueError):
            manager.reload_listeners.remove(heard)
