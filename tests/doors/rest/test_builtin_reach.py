"""Through the REST door: a built-in refused by the operator's reach fails with its own code, and
the refusal is in the audit chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import make_settings
from tests.support.server import Server, running_app


@pytest.fixture
def server(tmp_path: Path, skills_root: Path) -> Iterator[Server]:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("ready\n")
    settings = make_settings(
        tmp_path, skills_root, bundled_skills=True, builtin_read_paths=(str(logs),)
    )
    with running_app(settings) as server:
        yield server


def run(server: Server, name: str, args: dict[str, Any]) -> dict[str, Any]:
    response = server.call("POST", f"/v1/skills/{name}/execute", "vera", json={"args": args})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def finished(server: Server, execution_id: str) -> dict[str, Any]:
    response = server.call("GET", "/v1/audit", params={"subject": execution_id})
    entries = [e for e in response.json()["items"] if e["action"] == "execution.finished"]
    assert len(entries) == 1, entries
    data: dict[str, Any] = entries[0]["data"]
    return data


def test_a_viewer_reads_a_configured_root_but_not_the_data_dir_or_etc(
    server: Server, tmp_path: Path
) -> None:
    ok = run(server, "tail_file", {"path": str(tmp_path / "logs" / "app.log")})
    assert ok["status"] == "succeeded"
    assert ok["result"]["lines"] == ["ready"]
    for path in ("/etc/passwd", str(tmp_path / "data" / "ongrid.db")):
        body = run(server, "tail_file", {"path": path})
        assert body["status"] == "failed"
        assert body["error"]["code"] == "forbidden_path", body
        assert finished(server, body["id"])["error"] == "forbidden_path"
    assert server.call("GET", "/v1/audit/verify").json()["ok"] is True


def test_a_viewer_cannot_probe_cloud_metadata(server: Server) -> None:
    for name, args in (
        ("probe_tcp", {"host": "169.254.169.254", "port": 80}),
        ("probe_http", {"url": "http://169.254.169.254/latest/meta-data/"}),
        ("probe_dns", {"name": "metadata.google.internal"}),
    ):
        body = run(server, name, args)
        assert body["status"] == "failed"
        assert body["error"]["code"] == "forbidden_target", body
        assert finished(server, body["id"])["error"] == "forbidden_target"
