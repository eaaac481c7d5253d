"""GET /v1/loader: what the load skipped and why, for admins; /v1/health keeps the error count;
a skill that failed to load is named as such by the 404 of the REST door and by the MCP door."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import Server, make_settings, running_app
from tests.support.skills import write_persona, write_skill, write_skill_md


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    skills = tmp_path / "skills"
    write_skill(skills, "good")
    noexec = write_skill(skills, "noexec")
    (noexec / "run").chmod(0o644)
    typo = skills / "typo"
    typo.mkdir()
    (typo / "skill.json").write_text('{"name": "typo",\n "entry": }')
    write_skill(skills, "good", folder="good-again")
    native = tmp_path / "native"
    write_skill_md(native, "notes", {"name": "notes"})  # no description: refused
    runbook = {"name": "disk-runbook", "description": "Free a disk.", "licence": "MIT"}
    write_skill_md(native, "disk-runbook", runbook)  # loads, with two warnings
    personas = tmp_path / "personas"
    write_persona(personas, "oncall", mode="sometimes")
    (personas / "README.md").write_text("# Personas\n\nOne file per persona.\n")  # skipped
    settings = make_settings(
        tmp_path,
        skills,
        native_dirs=(str(native),),
        external_dirs=(str(skills), str(tmp_path / "absent")),
    )
    with running_app(settings) as running:
        yield running


def test_an_admin_sees_every_skipped_file_and_dir_with_its_path_and_reason(
    server: Server, tmp_path: Path
) -> None:
    answer = server.call("GET", "/v1/loader", "admin")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["skills"] == 2
    assert body["personas"] == 2  # the bundled default and coordinator: oncall was refused
    assert body["errors"] == 4
    by_path = {item["path"]: item for item in body["items"]}
    assert body["total"] == len(body["items"]) == 6
    noexec = by_path[str(tmp_path / "skills" / "noexec" / "skill.json")]
    assert noexec["what"] == "skill.json"
    assert noexec["kind"] == "build"
    assert noexec["name"] == "noexec"
    assert "not executable" in noexec["reason"]
    assert noexec["log_line"].startswith('skill loader: build "noexec": ')
    typo = by_path[str(tmp_path / "skills" / "typo" / "skill.json")]
    assert (typo["what"], typo["kind"], typo["name"]) == ("skill.json", "parse", None)
    assert typo["line"] == 2
    duplicate = by_path[str(tmp_path / "skills" / "good-again" / "skill.json")]
    assert (duplicate["kind"], duplicate["name"]) == ("duplicate", "good")
    assert duplicate["log_line"] == (
        f'skill loader: skill "good" already registered, skipping {duplicate["path"]}'
    )
    notes = by_path[str(tmp_path / "native" / "notes" / "SKILL.md")]
    assert (notes["what"], notes["kind"]) == ("SKILL.md", "build")
    persona = by_path[str(tmp_path / "personas" / "oncall.md")]
    assert (persona["what"], persona["name"]) == ("persona", "oncall")
    absent = by_path[str(tmp_path / "absent")]
    assert (absent["what"], absent["kind"], absent["reason"]) == ("dir", "dir", "not present")


def test_the_loader_warnings_carry_stable_codes_with_their_file_and_line(
    server: Server, tmp_path: Path
) -> None:
    body = server.call("GET", "/v1/loader", "admin").json()
    runbook = str(tmp_path / "native" / "disk-runbook" / "SKILL.md")
    assert [(w["code"], w["path"], w["name"], w["key"]) for w in body["warnings"]] == [
        ("name_normalised", runbook, "disk_runbook", "name"),
        ("unknown_key", runbook, "disk_runbook", "licence"),
    ]
    first = body["warnings"][0]
    assert first["message"] == 'name "disk-runbook" normalised to "disk_runbook"'
    assert first["log_line"] == f"skill loader: warning {runbook}: {first['message']}"


def test_a_readme_in_a_persona_folder_is_skipped_not_refused(server: Server) -> None:
    body = server.call("GET", "/v1/loader", "admin").json()
    assert not [i for i in body["items"] if i["path"].endswith("README.md")]
    assert body["errors"] == 4


def test_only_an_admin_may_read_the_loader_report(server: Server) -> None:
    for who in ("olga", "vera"):
        answer = server.call("GET", "/v1/loader", who)
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "forbidden"
    assert server.client.get("/v1/loader").status_code == 401


def test_health_counts_the_refused_files_without_a_token(server: Server) -> None:
    assert server.client.get("/v1/health").json()["loader_errors"] == 4


def test_a_skill_that_failed_to_load_is_not_found_with_the_loaders_reason(
    server: Server,
) -> None:
    answer = server.call("POST", "/v1/skills/noexec/execute", "olga", json={"args": {}})
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert message.startswith("unknown skill 'noexec': it failed to load: entry ")
    assert "is not executable" in message
    typo = server.call("GET", "/v1/skills/typo", "vera").json()["error"]["message"]
    assert typo.startswith("unknown skill 'typo': it failed to load: ")  # by its folder's name
    never = server.call("GET", "/v1/skills/never_written", "vera").json()["error"]["message"]
    assert never == "unknown skill 'never_written'"
    persona = server.call("GET", "/v1/personas/oncall", "vera").json()["error"]["message"]
    assert persona.startswith("unknown persona 'oncall': it failed to load: ")


def test_the_loader_report_is_declared_in_the_openapi_document(server: Server) -> None:
    schema = server.call("GET", "/openapi.json", "vera").json()
    operation = schema["paths"]["/v1/loader"]["get"]
    assert "403" in operation["responses"]
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/LoaderReport"}
    fields = schema["components"]["schemas"]["SkippedFile"]["properties"]
    assert set(fields) == set(server_item(server))
    warning = schema["components"]["schemas"]["LoaderWarningItem"]["properties"]
    assert set(warning) == {"code", "path", "name", "key", "message", "log_line"}


def server_item(server: Server) -> dict[str, object]:
    item: dict[str, object] = server.call("GET", "/v1/loader", "admin").json()["items"][0]
    return item


def test_a_reload_answers_each_file_it_skipped_with_a_stable_code_and_the_reason(
    server: Server, tmp_path: Path
) -> None:
    answer = server.call("POST", "/v1/reload", "admin")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["skills"], body["loader_errors"]) == (
        2,
        4,
    )  # good and disk-runbook, as at start-up
    codes = {item["path"]: (item["code"], item["field"]) for item in body["skipped"]}
    assert codes == {
        str(tmp_path / "skills" / "noexec" / "skill.json"): ("invalid_manifest", "entry"),
        str(tmp_path / "skills" / "typo" / "skill.json"): ("parse_error", None),
        str(tmp_path / "skills" / "good-again" / "skill.json"): ("name_taken", None),
        str(tmp_path / "native" / "notes" / "SKILL.md"): ("invalid_manifest", "description"),
        str(tmp_path / "personas" / "oncall.md"): ("invalid_manifest", "permission_mode"),
        str(tmp_path / "absent"): ("dir_missing", None),
    }
    # The same items as the loader report, reasons and loader lines included.
    assert body["skipped"] == server.call("GET", "/v1/loader", "admin").json()["items"]
    noexec = body["skipped"][[i["name"] for i in body["skipped"]].index("noexec")]
    assert "is not executable" in noexec["reason"]
    schema = server.call("GET", "/openapi.json", "vera").json()
    operation = schema["paths"]["/v1/reload"]["post"]
    declared = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert declared == {"$ref": "#/components/schemas/ReloadAnswer"}
    codes_doc = schema["components"]["schemas"]["SkippedFile"]["properties"]["code"]
    assert "symlink_escapes_root" in codes_doc["description"]
