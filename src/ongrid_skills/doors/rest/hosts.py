"""``GET /v1/hosts``: the edge workers this server sees (SPEC §17).

Every host the manager has heard of since it started: online or offline, its last heartbeat
(the worker's clock, ISO 8601), labels, version, the host skills it announces with their
definition hashes, and the calls it runs (by its last heartbeat, every manager's) and those of
this manager. Without a fleet (``ONGRID_NATS_URL`` unset) the list is empty and ``fleet`` is
null. It only reads the manager's view; the hosts page of the console builds on the same data.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ongrid_skills.doors.rest.errors import responses
from ongrid_skills.doors.rest.routes import Caller, Mgr
from ongrid_skills.execution.records import iso

router = APIRouter()


@router.get("/v1/hosts", responses=responses())
async def list_hosts(manager: Mgr, _caller: Caller) -> dict[str, Any]:
    """The fleet's hosts, online first, then by host id."""
    fleet = manager.fleet
    if fleet is None:
        return {"items": [], "total": 0, "fleet": None}
    items = [
        {
            **host,
            "last_heartbeat": iso(host["last_heartbeat"]),
            "started_at": iso(host["started_at"]),
        }
        for host in fleet.hosts_view()
    ]
    about = {"prefix": fleet.names.prefix, "ttl_seconds": fleet.ttl, "manager": fleet.id}
    return {"items": items, "total": len(items), "fleet": about}
