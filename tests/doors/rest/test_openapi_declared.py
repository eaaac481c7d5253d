"""What /openapi.json declares matches what the door answers (found by the schemathesis pass)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import make_settings
from tests.support.mcp import write_skill
from tests.support.server import Server, running_app


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    skills = tmp_path / "skills"
    write_skill(skills, "echo")
    with running_app(make_settings(tmp_path, skills)) as running:
        yield running


@pytest.fixture
def openapi(server: Server) -> dict[str, Any]:
    schema: dict[str, Any] = server.call("GET", "/openapi.json", who="vera").json()
    return schema


def operations(openapi: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, methods in openapi["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def test_no_operation_declares_422_and_every_one_declares_its_error_body(
    openapi: dict[str, Any],
) -> None:
    # Was: FastAPI's 422 on every route with parameters, while the door answers 400
    # invalid_request; 401, 404, 409, 413 and 429 were not declared at all.
    assert "HTTPValidationError" not in openapi["components"]["schemas"]
    for label, operation in operations(openapi):
        declared = operation["responses"]
        assert "422" not in declared, label
        for status in ("400", "413", "500") if label == "GET /v1/health" else ("400", "401"):
            body = declared[status]["content"]["application/json"]["schema"]
            assert body == {"$ref": "#/components/schemas/ErrorBody"}, label


def test_an_error_answer_has_the_declared_error_body(server: Server) -> None:
    answer = server.call("GET", "/v1/skills/no_such_skill", who="vera")
    assert answer.status_code == 404
    assert set(answer.json()) == {"error"}
    assert set(answer.json()["error"]) == {"code", "message", "details"}


def test_streams_and_metrics_declare_their_own_content_types(openapi: dict[str, Any]) -> None:
    paths = openapi["paths"]
    streams = (
        "/v1/executions/{execution_id}/events",
        "/v1/agent/runs/{run_id}/events",
        "/v1/approvals/events",
    )
    for stream in streams:
        assert list(paths[stream]["get"]["responses"]["200"]["content"]) == ["text/event-stream"]
    assert list(paths["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]


def test_closed_sets_of_filter_values_are_declared_as_enums(openapi: dict[str, Any]) -> None:
    def parameter(path: str, name: str) -> dict[str, Any]:
        found = [p for p in openapi["paths"][path]["get"]["parameters"] if p["name"] == name]
        schema: dict[str, Any] = found[0]["schema"]
        return schema

    assert parameter("/v1/skills", "class")["enum"] == ["safe", "mutating", "dangerous"]
    assert "succeeded" in parameter("/v1/executions", "status")["enum"]
    assert "waiting_approval" in parameter("/v1/agent/runs", "status")["enum"]


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("TRACE", "/v1/health", "GET"),
        ("DELETE", "/v1/agent/runs", "GET, POST"),
        ("PUT", "/v1/skills/echo/execute", "POST"),
    ],
)
def test_a_405_names_every_method_of_the_resource_in_allow(
    server: Server, method: str, path: str, allow: str
) -> None:
    # Was: no Allow header at all (the error handler dropped the exception's headers), and
    # Starlette's names only the first of two routes on one path.
    answer = server.call(method, path, who="vera")
    assert answer.status_code == 405
    assert answer.headers["allow"] == allow
    assert answer.json()["error"]["code"] == "method_not_allowed"
