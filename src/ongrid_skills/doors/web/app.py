"""The web console's application: security headers, the same-origin guard, errors as pages,
static files, and the routers of each page family.

:func:`build_web_app` assembles the door; it opens no store and loads no registry itself: the
served application (:mod:`ongrid_skills.doors.asgi`) sets ``app.state.manager`` when it starts.
It must never import another door.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.routing import Route

from ongrid_skills.doors.web import (
    agent_runs,
    api_docs,
    approvals,
    automation,
    chat,
    credentials,
    errors,
    execution_page,
    history,
    home,
    hosts,
    live,
    login,
    pack_install,
    packs,
    pages,
    persona_editor,
    personas,
    run,
)
from ongrid_skills.doors.web.assets import PREFIX, Assets, favicon, static_file
from ongrid_skills.doors.web.security import SameOriginGuard, SecurityHeaders
from ongrid_skills.doors.web.sessions import SessionStreams, session_checks
from ongrid_skills.doors.web.templates import environment
from ongrid_skills.doors.web.throttle import LoginThrottle
from ongrid_skills.settings import Settings


def build_web_app(settings: Settings) -> FastAPI:
    """The console at ``/``; ``app.state.manager`` must be set before it serves a request."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    assets = Assets()
    app.state.settings = settings
    app.state.assets = assets
    app.state.templates = environment(assets.url)
    app.state.login_throttle = LoginThrottle()
    app.state.audit_check = home.AuditCheck()
    app.state.session_checks = session_checks(app)
    errors.install(app)
    app.add_middleware(SessionStreams)  # innermost: the streams of logged-in users
    # Added last, so outermost: every answer carries the headers, the guard's refusals included.
    app.add_middleware(SameOriginGuard, public_url=settings.public_url)
    app.add_middleware(SecurityHeaders)
    app.router.routes.append(Route(PREFIX + "/{digest}/{name:path}", static_file, methods=["GET"]))
    app.router.routes.append(Route("/favicon.ico", favicon, methods=["GET"]))
    app.include_router(login.router)
    app.include_router(home.router)
    app.include_router(pages.router)
    app.include_router(live.router)
    app.include_router(approvals.router)
    app.include_router(history.router)
    app.include_router(hosts.router)
    app.include_router(persona_editor.router)  # before /personas/{name}: /personas/new
    app.include_router(personas.router)
    app.include_router(agent_runs.router)
    app.include_router(chat.router)
    app.include_router(run.router)
    app.include_router(execution_page.router)
    app.include_router(packs.router)
    app.include_router(pack_install.router)
    app.include_router(credentials.router)
    app.include_router(api_docs.router)
    app.include_router(automation.router)
    return app
