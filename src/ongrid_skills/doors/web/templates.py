"""Pages from Jinja2 templates: the environment, the navigation, and :func:`render`.

Every page extends ``base.html`` and is rendered through :func:`render`, which adds what every
page needs: the session (``me``, or None on the login and error pages), its CSRF token for the
forms (``csrf``), the navigation, and ``static(path)`` for the content-hashed URL of a static file.
Autoescaping is on for every template; a template never marks anything ``|safe``. Templates hold
no inline script or style (the CSP refuses them): behaviour lives in ``static/js``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ongrid_skills.doors.web.catalogue import shown_category
from ongrid_skills.execution.records import iso
from ongrid_skills.governance.gate import has_role
from ongrid_skills.governance.principal import Principal
from ongrid_skills.types import Role

TEMPLATES_DIR = Path(__file__).with_name("templates")


@dataclass(frozen=True, slots=True)
class NavItem:
    """One entry of the main navigation; ``section`` is what a page passes to be current.
    ``role``: the least role its page serves (the gate's rule of its REST routes); the entry
    is left out for the others, whom the page refuses anyway."""

    section: str
    label: str
    href: str
    role: Role = Role.VIEWER

    def shown_to(self, principal: Principal) -> bool:
        return has_role(principal, self.role)


#: The main navigation, in order. A new page family adds its entry here.
NAV: tuple[NavItem, ...] = (
    NavItem("home", "Home", "/"),
    NavItem("catalogue", "Catalogue", "/skills"),
    NavItem("chat", "Chat", "/chat"),
    NavItem("approvals", "Approvals", "/approvals"),
    NavItem("executions", "Executions", "/executions"),
    NavItem("hosts", "Hosts", "/hosts"),
    NavItem("audit", "Audit", "/audit"),
    NavItem("personas", "Personas", "/personas"),
    NavItem("agent", "Agent runs", "/agent/runs"),
    NavItem("automation", "Automation", "/automation", Role.OPERATOR),
    NavItem("packs", "Packs", "/packs", Role.ADMIN),
    NavItem("credentials", "Credentials", "/credentials", Role.ADMIN),
    NavItem("docs", "API", "/docs"),
)


def environment(static_url: Callable[[str], str]) -> Environment:
    """The template environment; ``static_url`` maps ``css/app.css`` to its hashed URL."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.globals["static"] = static_url
    env.globals["nav"] = NAV
    env.filters["iso"] = iso
    env.filters["when"] = when
    env.filters["ago"] = ago
    env.filters["category"] = shown_category
    return env


def when(ts: float | None) -> str:
    """A time as people read it in a table: ``2026-12-03 10:36:57 UTC``."""
    if ts is None:
        return "—"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(ts: float | None, now: float) -> str:
    """How long before ``now`` a time was, as people say it: ``12 s ago``, ``3 min ago``.

    >>> ago(100.0, 112.4), ago(0.0, 3 * 3600 + 120), ago(50.0, 40.0)
    ('12 s ago', '3 h 2 min ago', 'just now')
    """
    if ts is None:
        return "never"
    seconds = int(now - ts)
    if seconds <= 0:
        return "just now"
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min ago"
    return f"{seconds // 86400} d ago"


def render(
    request: Request,
    template: str,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    """A page: ``template`` with ``context`` and what every page gets. Pages are never cached
    (``no-store``): they hold a CSRF token and data that may change or be gone after logout."""
    env: Environment = request.app.state.templates
    session = getattr(request.state, "session", None)
    context.setdefault("section", None)
    context.setdefault("title", "")
    html = env.get_template(template).render(
        me=session,
        csrf=session.csrf if session is not None else "",
        **context,
    )
    response = HTMLResponse(html, status_code=status, headers=headers)
    response.headers["cache-control"] = "no-store"
    return response
