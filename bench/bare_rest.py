"""The REST floor (SPEC §15): a bare FastAPI endpoint on uvicorn that spawns the skill's child.

``POST /v1/skills/{name}/execute`` with ``{"args": {...}}``: FastAPI parses the body, the same
:class:`SubprocessRunner` ``serve`` uses (supervised, its group record in a data dir) runs the
skill's ``child`` with the args as JSON on stdin, and the endpoint answers the status and the
child's verbatim result. No auth, no gate, no store, no audit: what ``serve`` adds on top of
this is what the REST throughput bar measures. The server settings are ``serve``'s: the same
event loop (``eventloop.chosen``), the same HTTP protocol (``BoundedHttpTools``, httptools), no
access log, log level warning.

Run by ``bench_rest.py`` as a process of its own (as ``serve`` is)::

    python bench/bare_rest.py --port 8765 --skills DIR --data DIR
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi import FastAPI, Request, Response

from _common import SRC_DIR

sys.path.insert(0, str(SRC_DIR))


def make_app(skills: Path, data: Path) -> FastAPI:
    from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner

    runner = SubprocessRunner(groups_dir=str(data))
    app = FastAPI()

    @app.post("/v1/skills/{name}/execute")
    async def execute(name: str, request: Request) -> Response:
        body = await request.json()
        folder = skills / name
        spec = SpawnSpec(
            entry=str(folder / "child"),
            root=str(skills),
            cwd=str(folder),
            env={},
            timeout_seconds=30,
        )
        outcome = await runner.run(spec, json.dumps(body["args"]).encode())
        answer = {"status": str(outcome.status.value), "result": outcome.result}
        return Response(json.dumps(answer), media_type="application/json")

    return app


@contextmanager
def serve_bare(skills: Path, data: Path, port: int) -> Iterator[subprocess.Popen[str]]:
    """This module's server on ``port``, in a process of its own, until the block ends."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for name in ("ONGRID_EVENT_LOOP", "ONGRID_SPAWN_HELPER"):
        if name in os.environ:
            env[name] = os.environ[name]
    argv = [sys.executable, __file__, "--port", str(port), "--skills", str(skills)]
    proc = subprocess.Popen(
        [*argv, "--data", str(data)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    import uvicorn

    from ongrid_skills.doors.cli import eventloop
    from ongrid_skills.doors.cli.serving import BoundedHttpTools

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--skills", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    sock = socket.create_server(("127.0.0.1", args.port), backlog=2048)
    config = uvicorn.Config(
        make_app(args.skills, args.data),
        log_level="warning",
        access_log=False,
        http=BoundedHttpTools,
        loop=eventloop.chosen(),
    )
    print("serving", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
