"""The REST API's reference for a logged-in person: ``GET /docs`` and ``GET /docs/openapi.json``.

The page is built on the server from the OpenAPI document the REST door serves at
``/openapi.json`` (to a bearer token): every operation with its parameters, request body and
answers, and every schema they name. Nothing comes from another origin and no script is needed:
Swagger UI (FastAPI's ``/docs``) loads its code from a CDN, which the console's
Content-Security-Policy refuses and which an operator's network may not reach, so the REST door
no longer serves it. ``/docs/openapi.json`` is the same document for the session's cookie (a
download, or a file for another viewer).

The composed app (``doors/asgi.py``) hands the document's builder to the console as
``app.state.openapi``; this door never imports the REST door.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from ongrid_skills.doors.web.sessions import Session
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import NotFound

router = APIRouter()
METHODS = ("get", "post", "put", "patch", "delete")
REF_PREFIX = "#/components/schemas/"


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    where: str
    required: bool
    type: str
    description: str


@dataclass(frozen=True, slots=True)
class Answer:
    status: str
    description: str
    schema: str | None  # the name of a component schema, when it names one


@dataclass(slots=True)
class Operation:
    method: str
    path: str
    summary: str
    description: str
    parameters: list[Parameter] = field(default_factory=list)
    body: str | None = None  # the component schema of the JSON body, or "JSON"
    answers: list[Answer] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return f"{self.method}-{self.path}".replace("/", "-").replace("{", "").replace("}", "")


def _type(schema: Any) -> str:
    """A parameter's schema in a few words: ``string``, ``integer or null``, ``Name``."""
    if not isinstance(schema, dict):
        return ""
    if "$ref" in schema:
        return str(schema["$ref"]).removeprefix(REF_PREFIX)
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    return str(schema.get("type", "any"))


def _named(content: Any) -> str | None:
    """The component schema a JSON content names, else None."""
    schema = (content or {}).get("application/json", {}).get("schema", {})
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    return str(ref).removeprefix(REF_PREFIX) if isinstance(ref, str) else None


def operations(document: dict[str, Any]) -> list[Operation]:
    """Every operation of an OpenAPI document, in the order of its paths."""
    found = []
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            entry = Operation(
                method.upper(), path, op.get("summary", ""), op.get("description", "")
            )
            for p in op.get("parameters", []):
                entry.parameters.append(
                    Parameter(
                        p.get("name", ""),
                        p.get("in", ""),
                        bool(p.get("required")),
                        _type(p.get("schema")),
                        p.get("description", ""),
                    )
                )
            if "requestBody" in op:
                entry.body = _named(op["requestBody"].get("content")) or "JSON"
            for status, answer in op.get("responses", {}).items():
                entry.answers.append(
                    Answer(status, answer.get("description", ""), _named(answer.get("content")))
                )
            found.append(entry)
    return found


def _document(request: Request) -> dict[str, Any]:
    build: Callable[[], dict[str, Any]] | None = getattr(request.app.state, "openapi", None)
    if build is None:
        raise NotFound("this server has no REST API document")
    return build()


@router.get("/docs")
async def api_docs(request: Request, _session: Session) -> Response:
    document = _document(request)
    schemas = document.get("components", {}).get("schemas", {})
    return render(
        request,
        "api_docs.html",
        section="docs",
        title="REST API",
        info=document.get("info", {}),
        operations=operations(document),
        schemas={name: json.dumps(s, indent=2, ensure_ascii=False) for name, s in schemas.items()},
    )


@router.get("/docs/openapi.json")
async def api_document(request: Request, _session: Session) -> Response:
    """The OpenAPI document, for the session (``/openapi.json`` takes a bearer token)."""
    return JSONResponse(_document(request), headers={"cache-control": "no-store"})
