"""The REST door's FastAPI application: error mapping, the token gate, the body limit, the
duplicate-key refusal, routes.

:func:`build_rest_app` assembles the door around a lifespan it is given; it opens no store and
loads no registry itself (the served application in :mod:`ongrid_skills.doors.asgi` does, through
the runtime). It must never import another door.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import FastAPI

from ongrid_skills.doors.rest import errors
from ongrid_skills.doors.rest.agent_routes import router as agent_router
from ongrid_skills.doors.rest.approval_events import router as approval_events_router
from ongrid_skills.doors.rest.auth import AuthGate
from ongrid_skills.doors.rest.automation_routes import router as automation_router
from ongrid_skills.doors.rest.credential_routes import router as credential_router
from ongrid_skills.doors.rest.execute_path import ExecuteFastPath
from ongrid_skills.doors.rest.hosts import router as hosts_router
from ongrid_skills.doors.rest.json_bodies import RefuseDuplicateKeys
from ongrid_skills.doors.rest.pack_routes import PACKS_PATH
from ongrid_skills.doors.rest.pack_routes import router as pack_router
from ongrid_skills.doors.rest.persona_routes import router as persona_router
from ongrid_skills.doors.rest.routes import router

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def build_rest_app(lifespan: Lifespan, *, upload_limit: int = errors.MAX_BODY_BYTES) -> FastAPI:
    """The FastAPI app of ``/v1``: the lifespan must set ``app.state.manager`` and
    ``app.state.auth`` (an :class:`~ongrid_skills.doors.rest.auth.Authenticator`);
    ``upload_limit`` is the largest pack upload (``POST /v1/packs``; see
    :func:`~ongrid_skills.doors.pack_changes.upload_limit`)."""
    app = FastAPI(
        title="ongrid-skills",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,  # Swagger UI loads from a CDN: the console's /docs renders the document
        redoc_url=None,
    )
    errors.install(app)
    app.openapi = _as_answered(app)  # type: ignore[method-assign]
    # Added first, so innermost: bodies are checked only for callers the gate let in.
    app.add_middleware(RefuseDuplicateKeys)
    app.add_middleware(ExecuteFastPath)  # the execute route's well-formed calls, answered here
    app.add_middleware(AuthGate)
    app.add_middleware(errors.BodyLimit, uploads={PACKS_PATH: upload_limit})
    app.include_router(approval_events_router)  # before /v1/approvals/{approval_id}
    app.include_router(router)
    app.include_router(agent_router)
    app.include_router(pack_router)
    app.include_router(hosts_router)
    app.include_router(credential_router)
    app.include_router(persona_router)
    app.include_router(automation_router)
    return app


def _as_answered(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """FastAPI's schema, told what the door really answers: no 422 (an invalid request is a
    400 ``invalid_request``, declared with each route's other errors in errors.py), and error
    bodies in JSON also on the routes that stream events or serve metrics."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        fresh = app.openapi_schema is None
        schema = generate()  # built once, then cached by FastAPI in app.openapi_schema
        if fresh:
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    answers = operation.get("responses", {})
                    answers.pop("422", None)
                    for status, answer in answers.items():
                        content = answer.get("content", {})
                        if int(status) >= 400 and "application/json" not in content:
                            answer["content"] = {"application/json": content.popitem()[1]}
            components = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                components.pop(name, None)
        return schema

    return openapi


def _version() -> str:
    try:
        return version("ongrid-skills")
    except PackageNotFoundError:  # pragma: no cover
        return "0"
