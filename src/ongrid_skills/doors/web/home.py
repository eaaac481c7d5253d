"""The console's home, ``/``: what needs the person logged in, on one page.

In the order it is shown: the approval requests this principal may sign now (the desk's rule,
asked through ``approval_cards.decision_problems``), with the time each has left; the calls
running now; the calls that failed lately; the files the last load refused or skipped, each with
its stable code and reason (admins only, as ``GET /v1/loader``: paths and parse errors describe
the host; others see how many), and the skills loaded but unavailable, with why; the hosts that
are offline; and the audit chain's state.

The audit chain is verified as ``GET /v1/audit/verify`` verifies it, at most once every
:data:`AUDIT_CHECK_SECONDS` per console and in the background (verifying reads every entry: see
:class:`AuditCheck`), and the page says when.
The page only reads: nothing here signs, runs or changes anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from ongrid_skills.doors.web.approval_cards import Card, card
from ongrid_skills.doors.web.hosts import fleet_facts, hosts_view
from ongrid_skills.doors.web.sessions import Session, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.governance.gate import has_role
from ongrid_skills.manager import Manager
from ongrid_skills.skills.discovery import Skipped
from ongrid_skills.skills.model import Skill
from ongrid_skills.store import Store
from ongrid_skills.store.auditverify import Verification
from ongrid_skills.types import Role

router = APIRouter()
LOG = logging.getLogger("ongrid_skills.doors.web")

#: Pending requests looked at for the ones this principal may sign.
PENDING_LOOKED_AT = 100
#: Rows of each list (running calls, failures); the full lists are a link away.
LISTED = 10
#: How far back a failed call still counts as a recent failure.
RECENT_SECONDS = 24 * 3600
#: The ends of a call that mean something went wrong with it (not a refusal or a rejection).
FAILED = (Status.FAILED, Status.TIMED_OUT, Status.OUTPUT_TOO_LARGE, Status.INTERRUPTED)
#: How old the home's audit verification may be before the next visit verifies again.
AUDIT_CHECK_SECONDS = 300.0
#: How long the home waits for a verification it started before it shows the page.
AUDIT_WAIT_SECONDS = 2.0
#: Unavailable skills listed (the catalogue shows every one, with its reason).
UNAVAILABLE_LISTED = 50


@dataclass(frozen=True, slots=True)
class AuditState:
    """The last verification of the chain and when it was made (UNIX seconds)."""

    result: Verification
    at: float


class AuditCheck:
    """The home's verification of the audit chain, kept :data:`AUDIT_CHECK_SECONDS`.

    The page never waits long for it: a verification reads every entry (about 30 µs each, so
    tens of seconds on a chain of a million), so it runs in the background, one at a time, and
    the page waits at most ``wait`` seconds for it before showing the last verdict it has (or
    that the chain is being verified)."""

    def __init__(self, max_age: float = AUDIT_CHECK_SECONDS, wait: float = AUDIT_WAIT_SECONDS):
        self.max_age = max_age
        self.wait = wait
        self.last: AuditState | None = None
        self.running: asyncio.Task[None] | None = None  # the verification under way, if any

    def record(self, result: Verification) -> None:
        """A verification made elsewhere in this console (the audit page's *Verify now*)."""
        self.last = AuditState(result, time.time())

    async def state(self, store: Store) -> AuditState | None:
        """The newest verdict, after starting a verification if it is due; None until the
        first one is done."""
        last = self.last
        due = last is None or time.time() - last.at > self.max_age
        if due and (self.running is None or self.running.done()):
            self.running = asyncio.create_task(self._verify(store))
        if self.running is not None and not self.running.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.running), self.wait)
        return self.last

    async def _verify(self, store: Store) -> None:
        try:
            self.record(await asyncio.to_thread(store.audit.verify))  # reads every entry
        except Exception:
            LOG.exception("verifying the audit chain for the home page failed")


@dataclass(frozen=True, slots=True)
class LoadProblems:
    """What the last load did not take: every skipped item for an admin (None for others),
    and how many files it refused (what ``GET /v1/health`` says to anyone)."""

    items: list[Skipped] | None
    refused: int
    unavailable: list[Skill]
    unavailable_total: int


@router.get("/")
async def home(request: Request, session: Session) -> Response:
    manager = manager_of(request)
    principal = session.principal
    manager.desk.expire_due()
    pending = manager.store.approvals.query(status="pending", limit=PENDING_LOOKED_AT)
    cards = [card(manager, a, principal) for a in reversed(pending)]  # the nearest expiry first
    running, more_running = manager.store.executions.page(status=Status.RUNNING, limit=LISTED)
    check: AuditCheck = request.app.state.audit_check
    fleet = fleet_facts(manager)
    return render(
        request,
        "home.html",
        section="home",
        title="Home",
        to_sign=signable(cards),
        pending_total=len(pending),
        running=running,
        more_running=more_running is not None,
        failures=recent_failures(manager, time.time()),
        failed_statuses=[s.value for s in FAILED],
        load=load_problems(manager, has_role(principal, Role.ADMIN)),
        fleet=fleet,
        offline=offline_hosts(manager) if fleet is not None else [],
        audit=await check.state(manager.store),
        now=time.time(),
    )


def signable(cards: list[Card]) -> list[Card]:
    """The requests whose Approve button this viewer sees."""
    return [c for c in cards if c.approve_problem is None]


def recent_failures(manager: Manager, now: float) -> list[Execution]:
    """The newest calls that failed within :data:`RECENT_SECONDS`, newest first."""
    items, _more = manager.store.executions.page(statuses=[s.value for s in FAILED], limit=LISTED)
    return [e for e in items if now - e.created_at <= RECENT_SECONDS]


def load_problems(manager: Manager, admin: bool) -> LoadProblems:
    registry = manager.registry
    report = registry.report
    # Refused files first (they are errors), then names taken twice, then dirs not walked.
    order = {"parse": 0, "build": 0, "duplicate": 1, "dir": 2}
    items = sorted(report.skipped, key=lambda item: order.get(item.kind, 3)) if admin else None
    unavailable = sorted(
        (s for s in registry.skills.values() if not s.available), key=lambda s: s.name
    )
    return LoadProblems(
        items, len(report.errors), unavailable[:UNAVAILABLE_LISTED], len(unavailable)
    )


def offline_hosts(manager: Manager) -> list[dict[str, Any]]:
    return [h for h in hosts_view(manager) if not h["online"]]
