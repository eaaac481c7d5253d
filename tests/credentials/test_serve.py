"""Credentials through a real ``serve``: bound by an admin over REST, given to a skill that calls
a real HTTP API on loopback with its token, and found nowhere else: not in a REST, SSE or MCP
answer, not in the data dir (the SQLite database and its WAL), not in the audit sink, not in an
approval webhook, which names the credential instead."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.http import QuietHandler, serve
from tests.support.leaks import files_holding
from tests.support.served import Served, serve_for_cli
from tests.support.server import start_serve, stop
from tests.support.skills import write_skill
from tests.support.sse import read_sse
from tests.support.waiting import wait_for
from tests.support.webhooks import Receiver, receiving

SECRET = "tok_9f8e7d6c5b4a-LIVE"
OTHER = "tok_rotated-0042-LIVE"
FORMS = {
    "raw": SECRET,
    "base64": base64.b64encode(SECRET.encode()).decode(),
    "url": quote(SECRET, safe=""),
}
SLOT = {
    "slot": "api",
    "label": "API token",
    "fields": ["token"],
    "inject": {
        "env": {"API_TOKEN": "{{token}}"},
        "files": [{"path": "token", "content": "{{token}}"}],
    },
}
LEAKY = f"""#!{sys.executable}
import base64, json, os, sys, time, urllib.parse, urllib.request
args = json.load(sys.stdin)
token = os.environ["API_TOKEN"]
assert open(os.path.join(os.environ["CREDENTIALS_DIRECTORY"], "token")).read() == token
request = urllib.request.Request(args["url"], headers={{"Authorization": "Bearer " + token}})
with urllib.request.urlopen(request, timeout=5) as answer:
    status = answer.status
for part in (token[:7], token[7:] + "\\n"):
    sys.stderr.write(part); sys.stderr.flush(); time.sleep(0.02)
sys.stderr.write(base64.b64encode(token.encode()).decode() + "\\n")
sys.stderr.write(json.dumps({{"progress": 1, "message": "using " + token}}) + "\\n")
print(json.dumps({{"status": status, "token": token, "q": urllib.parse.quote(token, safe="")}}))
"""


class Api(QuietHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Api.seen.append(self.headers.get("Authorization", ""))
        self.send_body(200, b"{}", "application/json")


def bound(served: Served, credential: str, value: str, skill: str) -> None:
    """``credential`` made with ``value`` (once) and bound to slot ``api`` of ``skill``."""
    body = {"name": credential, "values": {"token": value}}
    made = served.http("POST", "/v1/credentials", "admin", json=body)
    assert made.status_code in (201, 409), made.text
    bind = {"slot": "api", "skill": skill}
    answer = served.http("POST", f"/v1/credentials/{credential}/bind", "admin", json=bind)
    assert answer.status_code == 200, answer.text


def leaked(text: str) -> list[str]:
    return [name for name, form in FORMS.items() if form in text]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Receiver, str]]:
    base = tmp_path_factory.mktemp("credentials")

    def skills(root: Path) -> None:
        write_skill(root, "unbound_call", LEAKY, credentials=[SLOT])
        write_skill(root, "api_call", LEAKY, credentials=[SLOT])
        write_skill(root, "api_change", LEAKY, credentials=[SLOT], **{"class": "dangerous"})

    with receiving() as receiver, serve(Api) as api:
        served = serve_for_cli(
            base,
            skills,
            ONGRID_AUDIT_SINK=str(base / "audit.sink"),
            ONGRID_APPROVAL_WEBHOOKS=receiver.url,
        )
        try:
            yield served, receiver, f"http://127.0.0.1:{api.server_port}/user"
        finally:
            stop(served.process)


def test_an_unbound_slot_makes_the_skill_unavailable_and_refused(
    world: tuple[Served, Receiver, str],
) -> None:
    served, _receiver, url = world
    shown = served.http("GET", "/v1/skills/unbound_call", "olga").json()
    assert shown["available"] is False
    assert shown["unavailable_reason"] == "needs credential for slot api"
    assert shown["credentials"][0]["slot"] == "api"
    refused = served.http(
        "POST", "/v1/skills/api_call/execute", "olga", json={"args": {"url": url}}
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "credential_missing"


def test_only_an_admin_manages_credentials_and_no_answer_holds_a_value(
    world: tuple[Served, Receiver, str],
) -> None:
    served, _receiver, _url = world
    body = {"name": "listed", "values": {"token": SECRET}}
    assert served.http("POST", "/v1/credentials", "olga", json=body).status_code == 403
    made = served.http("POST", "/v1/credentials", "admin", json=body)
    assert made.status_code == 201, made.text
    listed = served.http("GET", "/v1/credentials", "admin")
    assert "listed" in [c["name"] for c in listed.json()["items"]]
    assert leaked(made.text + listed.text) == []
    short = served.http(
        "POST", "/v1/credentials", "admin", json={"name": "x", "values": {"token": "12345"}}
    )
    assert short.status_code == 400
    assert "cannot be masked safely" in short.json()["error"]["message"]
    as_olga = served.http(
        "POST", "/v1/credentials/listed/bind", "olga", json={"slot": "api", "skill": "api_call"}
    )
    assert as_olga.status_code == 403


def test_a_call_uses_its_token_and_nothing_it_printed_shows_the_secret(
    world: tuple[Served, Receiver, str],
) -> None:
    served, _receiver, url = world
    bound(served, "github", SECRET, "api_call")
    assert served.http("GET", "/v1/skills/api_call", "olga").json()["available"] is True
    answer = served.http("POST", "/v1/skills/api_call/execute", "olga", json={"args": {"url": url}})
    assert answer.status_code == 200, answer.text
    execution = answer.json()
    assert execution["status"] == "succeeded", execution
    assert f"Bearer {SECRET}" in Api.seen
    assert execution["result"] == {"status": 200, "token": "***", "q": "***"}
    assert execution["credentials"] == {"api": "github"}
    texts = [answer.text, served.http("GET", f"/v1/executions/{execution['id']}").text]
    headers = {"Authorization": f"Bearer {served.tokens['olga']}"}
    events_url = f"{served.url}/v1/executions/{execution['id']}/events"
    with httpx.stream("GET", events_url, headers=headers, timeout=30) as events:
        texts += [event.data for event in read_sse(events)]
    texts.append(served.http("GET", "/v1/audit?limit=50", "admin").text)
    assert leaked("\n".join(texts)) == []
    assert "***" in "\n".join(texts[2:-1])  # the stderr lines were masked, not dropped


def test_an_mcp_call_shows_no_secret(world: tuple[Served, Receiver, str]) -> None:
    served, _receiver, url = world
    bound(served, "github", SECRET, "api_call")

    async def call() -> str:
        headers = {"Authorization": f"Bearer {served.tokens['olga']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
            streamable_http_client(served.url + "/mcp", http_client=http) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("api_call", {"url": url})
            return json.dumps(result.model_dump(mode="json"))

    text = asyncio.run(call())
    assert '"***"' in text
    assert leaked(text) == []


def test_an_approval_names_its_credential_and_a_rebind_voids_it(
    world: tuple[Served, Receiver, str],
) -> None:
    served, receiver, url = world
    bound(served, "github", SECRET, "api_change")
    pending = served.execute("api_change", "olga", args={"url": url})
    assert pending["status"] == "pending_approval", pending
    approval = served.http("GET", f"/v1/approvals/{pending['approval_id']}").json()
    assert approval["credentials"] == {"api": "github"}
    requested = receiver.wait(1)[0].body
    assert "github" in json.dumps(requested)
    listed = served.cli("approvals", "list", who="admin")
    assert "api_change [api=github]" in listed.output, listed.output
    served.http(
        "POST", "/v1/credentials", "admin", json={"name": "other", "values": {"token": OTHER}}
    )
    rebound = served.http(
        "POST", "/v1/credentials/other/bind", "admin", json={"slot": "api", "skill": "api_change"}
    )
    assert rebound.json() == {"replaced": "github"}
    voided = served.http("GET", f"/v1/approvals/{pending['approval_id']}").json()
    assert voided["status"] == "void"
    assert "rebound" in voided["reason"]
    assert leaked(json.dumps(receiver.bodies())) == []


def test_nothing_in_the_data_dir_or_the_audit_sink_holds_the_secret(
    world: tuple[Served, Receiver, str],
) -> None:
    served, _receiver, url = world
    bound(served, "github", SECRET, "api_call")
    ran = served.http("POST", "/v1/skills/api_call/execute", "olga", json={"args": {"url": url}})
    assert ran.json()["status"] == "succeeded", ran.text
    base = served.skills.parent
    assert any(p.name.endswith("-wal") for p in (base / "data").iterdir())
    for form in FORMS.values():
        assert files_holding(base / "data", form) == []
        assert files_holding(base, form) == []  # the audit sink beside it too


SLEEPER = f"""#!{sys.executable}
import json, os, sys, time
args = json.load(sys.stdin)
with open(args["note"], "w") as f:
    f.write(os.environ["CREDENTIALS_DIRECTORY"])
time.sleep(60)
print("{{}}")
"""


def test_the_files_of_a_call_cut_by_a_kill_9_are_removed_at_the_next_start(
    tmp_path: Path,
) -> None:
    def skills(root: Path) -> None:
        write_skill(root, "slow_call", SLEEPER, credentials=[SLOT])

    served = serve_for_cli(tmp_path, skills)
    note = tmp_path / "folder"
    try:
        served.http("POST", "/v1/credentials", json={"name": "c", "values": {"token": SECRET}})
        served.http("POST", "/v1/credentials/c/bind", json={"slot": "api", "skill": "slow_call"})
        served.execute("slow_call", wait=False, args={"note": str(note)})
        folder = Path(wait_for(lambda: note.exists() and note.read_text(), "the call's folder"))
        assert (folder / "token").read_text() == SECRET
        served.process.proc.send_signal(signal.SIGKILL)
        served.process.proc.wait(10)
        assert folder.exists()  # nobody could remove it
    finally:
        stop(served.process)
    again = start_serve(tmp_path / "data", {"ONGRID_SKILLS_EXTERNAL_DIRS": str(served.skills)})
    try:
        wait_for(lambda: not folder.exists(), "the next start to remove the folder", 15)
    finally:
        stop(again)
