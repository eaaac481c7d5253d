"""A real ``ongrid-skills serve`` for the CLI to talk to, with a token per name of
:data:`tests.support.server.ROLES`, and the two ways to run the CLI against it: in-process
(click's CliRunner, :meth:`Served.cli`) and as the console script (:meth:`Served.script`),
which streaming, signals and exact bytes need.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner, Result

from ongrid_skills.doors.cli.main import cli
from ongrid_skills.execution.records import Status
from ongrid_skills.store import open_store
from tests.support.processes import CLI
from tests.support.server import ROLES, ServeProcess, start_serve
from tests.support.waiting import wait_for


@dataclass
class Served:
    process: ServeProcess
    tokens: dict[str, str]
    skills: Path

    @property
    def url(self) -> str:
        return self.process.url

    def environ(self, who: str | None, url: str | None = None) -> dict[str, str]:
        """ONGRID_URL (this server, or ``url``) and ONGRID_TOKEN (``who``'s, if any)."""
        env = {"ONGRID_URL": url or self.url, "ONGRID_BUNDLED_SKILLS": "0"}
        if who is not None:
            env["ONGRID_TOKEN"] = self.tokens[who]
        return env

    def cli(
        self, *args: str, who: str | None = "olga", url: str | None = None, **kw: Any
    ) -> Result:
        """The CLI in-process, with ONGRID_URL/ONGRID_TOKEN set (``input=`` for stdin)."""
        env: dict[str, str | None] = {"ONGRID_DATA_DIR": None, "ONGRID_TOKEN": None}
        env.update(self.environ(who, url))
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False, **kw)

    def script(
        self, *args: str, who: str | None = "olga", url: str | None = None, **kw: Any
    ) -> subprocess.Popen[str]:
        """The console script, started with pipes for stdout and stderr."""
        env = {"PATH": os.environ["PATH"], **self.environ(who, url)}
        return subprocess.Popen(
            [CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw
        )

    def http(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kw)

    def execute(self, skill: str, who: str = "olga", **body: Any) -> dict[str, Any]:
        answer = self.http("POST", f"/v1/skills/{skill}/execute", who, json={"args": {}, **body})
        assert answer.status_code in (200, 202), answer.text
        result: dict[str, Any] = answer.json()
        return result

    def final(self, execution_id: str, timeout: float = 20) -> dict[str, Any]:
        def finished() -> dict[str, Any] | None:
            body: dict[str, Any] = self.http("GET", f"/v1/executions/{execution_id}").json()
            return body if Status(body["status"]).final else None

        return wait_for(finished, f"execution {execution_id} to finish", timeout)


def serve_for_cli(base: Path, write_skills: Callable[[Path], None], **env: str) -> Served:
    """``serve`` on a fresh data dir under ``base`` with the skills ``write_skills`` writes."""
    skills, data = base / "skills", base / "data"
    skills.mkdir(parents=True)
    write_skills(skills)
    store = open_store(str(data), None)
    tokens = {name: store.tokens.create(name, role)[0] for name, role in ROLES.items()}
    store.close()
    process = start_serve(data, {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills), **env})
    return Served(process, tokens, skills)
