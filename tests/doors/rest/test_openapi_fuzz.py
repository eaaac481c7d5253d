"""Schemathesis against ``/openapi.json`` of a real ``serve`` on loopback, with a token of each
role: no answer is a 5xx, and every answer conforms to the schema (status code declared, content
type declared, body valid against the declared schema, ``Allow`` on a 405).

Each operation gets schema-valid and schema-invalid examples (hypothesis, derandomised: the same
examples every run). Path parameters are, half of the time, the id of a real object seeded first
(a skill, an execution, a pending approval, an agent run), so the fuzzing also reaches past 404.
The agent's LLM is a closed loopback port: an agent run fails fast, nothing leaves the machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.mcp import ServeProcess, start_serve, stop, write_skill
from tests.support.server import free_port

#: Examples per operation, per generation mode, per role: 24 operations x 2 modes x 3 roles.
EXAMPLES = 10
ROLES = ("viewer", "operator", "admin")
#: What every answer must satisfy: checks of the answers, not of the server's leniency. Not
#: ``positive_data_acceptance``: a schema-valid request may be refused for what a schema cannot
#: say (an opaque cursor, a skill's own args schema); nor ``negative_data_rejection``: a repeated
#: query parameter is read as its last value (Starlette), an empty filter as no filter.
CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.response_schema_conformance,
    openapi_checks.unsupported_method,
]
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
PERSONA = """---
name: fixer
description: Fixes things, with a confirmation.
when_to_use: When something must change.
permission_mode: mutating-with-confirm
---
You fix things.
"""


@dataclass
class Api:
    process: ServeProcess
    tokens: dict[str, str]
    schema: Any
    #: Real ids by path-parameter name; ``final_execution_id`` only for the event streams.
    known: dict[str, list[str]] = field(default_factory=dict)


def seed(url: str, tokens: dict[str, str]) -> dict[str, list[str]]:
    """Objects for the path parameters: finished and pending executions, an approval, a run."""
    operator = {"Authorization": f"Bearer {tokens['operator']}"}
    with httpx.Client(base_url=url, headers=operator, timeout=30) as client:

        def execute(name: str, **body: Any) -> dict[str, Any]:
            answer = client.post(f"/v1/skills/{name}/execute", json=body)
            assert answer.status_code in (200, 202), answer.text
            result: dict[str, Any] = answer.json()
            return result

        finished = [execute("echo", args={"n": 1})["id"], execute("fail")["id"]]
        pending = execute("change", args={})
        assert pending["status"] == "pending_approval", pending
        run = client.post("/v1/agent/runs", json={"message": "hello", "wait": True})
        assert run.status_code == 200, run.text
    return {
        "name": ["echo", "change", "fixer", "default"],
        "execution_id": [*finished, pending["id"]],
        "final_execution_id": finished,
        "approval_id": [pending["approval_id"]],
        "run_id": [run.json()["id"]],
    }


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    base = tmp_path_factory.mktemp("fuzz")
    skills, personas, data = base / "skills", base / "personas", base / "data"
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    write_skill(skills, "echo", "#!/bin/sh\nexec cat\n", schema=schema)
    write_skill(skills, "fail", "#!/bin/sh\ncat >/dev/null\necho oops >&2\nexit 1\n")
    write_skill(skills, "change", **{"class": "mutating"})
    personas.mkdir()
    (personas / "fixer.md").write_text(PERSONA)
    store = open_store(str(data), None)
    tokens = {role: store.tokens.create(f"fuzz_{role}", Role(role))[0] for role in ROLES}
    store.close()
    env = {
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_PERSONAS_DIRS": str(personas),
        "ONGRID_LLM_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",  # nothing listens there
        "ONGRID_LLM_API_KEY": "fuzz",
        "ONGRID_LLM_MODEL": "fuzz",
        "ONGRID_LLM_MAX_RETRIES": "0",
    }
    process = start_serve(data, env)
    try:
        loaded = schemathesis.openapi.from_url(
            f"{process.url}/openapi.json",
            headers={"Authorization": f"Bearer {tokens['viewer']}"},
            timeout=10,
        )
        yield Api(process, tokens, loaded, seed(process.url, tokens))
    finally:
        stop(process)


def known_value(api: Api, path: str, parameter: str) -> list[str]:
    if parameter == "execution_id" and path.endswith("/events"):
        # A pending execution's stream (follow=true) would wait for its approval.
        return api.known["final_execution_id"]
    return api.known.get(parameter, [])


def fuzz_operation(api: Api, operation: Any, mode: GenerationMode, role: str) -> None:
    headers = {"Authorization": f"Bearer {api.tokens[role]}"}
    session = requests.Session()

    @FUZZ
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def one(case: Any, data: st.DataObject) -> None:
        for name in list(case.path_parameters or {}):
            choices = known_value(api, operation.path, name)
            if choices and data.draw(st.booleans(), label=f"real {name}"):
                case.path_parameters[name] = data.draw(st.sampled_from(choices), label=name)
        if operation.path == "/v1/approvals/events":
            # The live inbox never ends by itself: ask for the pending requests only.
            case.query = {**(case.query or {}), "follow": "false"}
        case.call_and_validate(
            base_url=api.process.url,
            session=session,
            headers=headers,
            checks=CHECKS,
            timeout=30,
        )

    try:
        one()
    finally:
        session.close()


def operations(api: Api) -> list[Any]:
    return [result.ok() for result in api.schema.get_all_operations()]


@pytest.mark.parametrize("role", ROLES)
def test_no_operation_answers_5xx_or_outside_its_declared_schema(api: Api, role: str) -> None:
    failures: dict[str, str] = {}
    for operation in operations(api):
        modes = [GenerationMode.POSITIVE]
        if len(operation.query) or len(operation.body) or len(operation.headers):
            # Else nothing can be negated: any string is a valid path parameter.
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:
            try:
                fuzz_operation(api, operation, mode, role)
            except (Exception, BaseExceptionGroup) as exc:  # report every operation's failure
                failures[f"{operation.label} ({mode.value})"] = str(exc)[:2000]
    assert not failures, json.dumps(failures, indent=1)


def test_the_fuzzing_covers_every_route_of_the_rest_door(api: Api) -> None:
    headers = {"Authorization": f"Bearer {api.tokens['viewer']}"}
    served = httpx.get(f"{api.process.url}/openapi.json", headers=headers).json()["paths"]
    declared = {f"{m.upper()} {path}" for path, methods in served.items() for m in methods}
    labels = {operation.label for operation in operations(api)}
    assert labels == declared
    assert len(labels) >= 24
    assert "POST /v1/skills/{name}/execute" in labels
    assert "GET /v1/agent/runs/{run_id}/events" in labels


def test_the_seeded_objects_exist(api: Api) -> None:
    headers = {"Authorization": f"Bearer {api.tokens['viewer']}"}
    for execution_id in api.known["execution_id"]:
        answer = httpx.get(f"{api.process.url}/v1/executions/{execution_id}", headers=headers)
        assert answer.status_code == 200
    approval = api.known["approval_id"][0]
    assert httpx.get(f"{api.process.url}/v1/approvals/{approval}", headers=headers).is_success


def test_the_agent_llm_is_a_closed_loopback_port(api: Api) -> None:
    headers = {"Authorization": f"Bearer {api.tokens['viewer']}"}
    run = httpx.get(f"{api.process.url}/v1/agent/runs/{api.known['run_id'][0]}", headers=headers)
    assert run.json()["status"] == "failed"
    assert "127.0.0.1" in json.dumps(run.json())
