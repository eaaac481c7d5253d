"""REST benchmarks (SPEC §15): execute latency and throughput, the skills listing, no leaks.

In one run, against the same trivial C child:

- the C floor (``c/floor.c``): p50 per call (1 parent) and best calls/s (1 or 2 parents);
- the runner in-process (``SubprocessRunner.run``): p50 per call;
- ``POST /v1/skills/c_child/execute`` on a real ``ongrid-skills serve`` process (uvicorn, auth,
  gate, the row written before the spawn, the outcome group-committed after it, audit chain):
  p50 per request from a keep-alive raw-socket client (so the client adds as little as
  possible), in ``--blocks`` serial blocks interleaved with blocks of the runner in-process and
  of the C floor, so that noise hits them alike (best block p50 each, median shown too); then
  requests/s and p50 with 1, 8 and 32 concurrent keep-alive clients; the best req/s counts.
- ``GET /v1/skills`` on a server holding 10,000 external skills: p50 of 20 requests.
- After ``--leak-calls`` executions (default 10,000): open fds of the server and zombie children
  compared with the start.

- the REST floor (``bare_rest.py``): a bare FastAPI endpoint on uvicorn, with ``serve``'s server
  settings, that runs the same child with the same ``SubprocessRunner`` and no auth, gate or
  store; measured at the same client concurrency levels as ``serve``, the two alternating level
  by level in each round.

Targets: REST p50 ≤ runner p50 + 1.5 ms; REST req/s ≥ 0.85× the bare endpoint's at each client
concurrency (1, 8 and 32: the worst level counts); listing ≤ 100 ms; no zombie, no fd growth.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import (
    PAYLOAD,
    SRC_DIR,
    CBinaries,
    SkipBench,
    build_c,
    child_processes,
    eprint,
    run_floor,
    summarize_us,
)
from bare_rest import serve_bare

sys.path.insert(0, str(SRC_DIR))

CLI = Path(sys.executable).with_name("ongrid-skills")
BODY = json.dumps({"args": {"a": 1}}).encode()


def write_skill(root: Path, binaries: CBinaries, name: str = "c_child") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    shutil.copy(binaries.child, folder / "child")
    manifest = {
        "name": name,
        "description": "Trivial C skill for benchmarks.",
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "entry": "child",
    }
    (folder / "skill.json").write_text(json.dumps(manifest))


def write_many(root: Path, count: int) -> None:
    script = "#!/bin/sh\ncat\n"
    for i in range(count):
        folder = root / f"g{i // 100:04d}" / f"s{i:05d}"
        folder.mkdir(parents=True)
        entry = folder / "run.sh"
        entry.write_text(script)
        entry.chmod(0o755)
        manifest = {
            "name": f"skill_{i:05d}",
            "description": f"Generated skill number {i} for the listing benchmark.",
            "schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "entry": "run.sh",
            "category": f"cat{i % 10}",
        }
        (folder / "skill.json").write_text(json.dumps(manifest))


class Server:
    def __init__(self, proc: subprocess.Popen[str], port: int, token: str) -> None:
        self.proc = proc
        self.port = port
        self.token = token


def first_token(line: str, data: Path) -> str:
    """The first-start admin token: ``serve`` writes it to ``<data dir>/first-admin-token``
    when stdout is not a terminal (as here), and prints it at the end of the line otherwise."""
    path = data / "first-admin-token"
    if "written to" in line and path.exists():
        return path.read_text().strip()
    return line.rsplit(" ", 1)[-1].strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(
    skills: Path,
    data: Path,
    extra_env: dict[str, str] | None = None,
    program: list[str] | None = None,
) -> Iterator[Server]:
    """``ongrid-skills serve`` (or ``program`` given its arguments) on a free loopback port."""
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_DATA_DIR": str(data),
        "ONGRID_BUNDLED_SKILLS": "0",
        **(extra_env or {}),
    }
    proc = subprocess.Popen(
        [*(program or [str(CLI)]), "-q", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    token = ""
    try:
        assert proc.stdout is not None
        for _ in range(2):
            line = proc.stdout.readline()
            if "admin token" in line:
                token = first_token(line, data)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status, _ = request(port, "GET", "/v1/health", token)
                if status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        yield Server(proc, port, token)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def raw_request(method: str, path: str, token: str, body: bytes = b"") -> bytes:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def read_response(sock: socket.socket, buf: bytearray) -> tuple[int, bytes]:
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        rest += chunk
    buf[:] = rest[length:]
    return status, rest[:length]


def request(port: int, method: str, path: str, token: str, body: bytes = b"") -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(raw_request(method, path, token, body))
        return read_response(sock, bytearray())


def rest_serial(server: Server, calls: int) -> dict[str, float]:
    """p50 (and more) of ``calls`` requests made one after the other on one connection."""
    message = raw_request("POST", "/v1/skills/c_child/execute", server.token, BODY)
    durations: list[int] = []
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        for _ in range(calls):
            started = time.perf_counter_ns()
            sock.sendall(message)
            status, body = read_response(sock, buf)
            durations.append(time.perf_counter_ns() - started)
            if status != 200 or b'"succeeded"' not in body:
                raise RuntimeError(f"execute failed: {status} {body[:200]!r}")
    return summarize_us(durations)


async def rest_throughput(server: Server, calls: int, concurrency: int) -> tuple[float, float]:
    """(requests/s, p50 µs) of ``calls`` requests from ``concurrency`` keep-alive clients."""
    message = raw_request("POST", "/v1/skills/c_child/execute", server.token, BODY)
    remaining = calls
    durations: list[int] = []

    async def worker() -> None:
        nonlocal remaining
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            while remaining > 0:
                remaining -= 1
                sent = time.perf_counter_ns()
                writer.write(message)
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                durations.append(time.perf_counter_ns() - sent)
                if b'"succeeded"' not in body:
                    raise RuntimeError(f"execute failed: {body[:200]!r}")
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - started), summarize_us(durations)["p50_us"]


class RunnerSide:
    """The runner in this process, on the same child: a serial block gives its p50."""

    def __init__(self, root: Path) -> None:
        from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner

        folder = root / "c_child"
        self.spec = SpawnSpec(
            entry=str(folder / "child"),
            root=str(root),
            cwd=str(folder),
            env={},
            timeout_seconds=30,
        )
        self.runner = SubprocessRunner()

    def block(self, calls: int) -> dict[str, float]:
        async def go() -> list[int]:
            out = []
            for _ in range(calls):
                started = time.perf_counter_ns()
                outcome = await self.runner.run(self.spec, PAYLOAD)
                out.append(time.perf_counter_ns() - started)
                if outcome.status != "succeeded":
                    raise RuntimeError(f"runner call failed: {outcome!r}")
            return out

        return summarize_us(asyncio.run(go()))


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) of process ``pid`` and its threads, not of its children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_pass(server: Server, calls: int, level: int = 8) -> tuple[float, float]:
    """Requests/s and the server's own CPU per request (µs) over ``calls`` requests."""
    before = cpu_seconds(server.proc.pid)
    rps, _p50 = asyncio.run(rest_throughput(server, calls, level))
    return rps, (cpu_seconds(server.proc.pid) - before) / calls * 1e6


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


LEVELS = (1, 8, 32)
#: SPEC §15: REST req/s ≥ this × the bare FastAPI endpoint's, at every client concurrency.
REST_TPUT_BAR = 0.85


def run(
    calls: int,
    tput_calls: int,
    leak_calls: int,
    listing: int,
    blocks: int = 6,
    rounds: int = 2,
) -> dict[str, Any]:
    """Every figure of the REST bench: ``blocks`` interleaved serial blocks of ``calls`` per
    side, ``tput_calls`` requests per concurrency level and side, REST and the bare FastAPI
    endpoint alternating (best of ``rounds`` rounds each)."""
    binaries = build_c()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ongrid-bench-rest-") as tmp:
        root = Path(os.path.realpath(tmp))
        skills = root / "skills"
        write_skill(skills, binaries)
        cwd = str(skills / "c_child")
        runner = RunnerSide(skills)
        with serve(skills, root / "data") as server:
            rest_serial(server, min(200, calls))  # warm-up
            runner.block(min(200, calls))
            p50s: dict[str, list[float]] = {"floor": [], "runner": [], "rest": []}
            sides = {
                "floor": lambda: run_floor(binaries, calls, 1, cwd=cwd),
                "runner": lambda: runner.block(calls),
                "rest": lambda: rest_serial(server, calls),
            }
            for b in range(blocks):
                names = list(sides)[b % 3 :] + list(sides)[: b % 3]
                for name in names:
                    p50s[name].append(sides[name]()["p50_us"])
                eprint(
                    f"  block {b + 1}/{blocks}: "
                    + ", ".join(f"{n} {p50s[n][-1]:.0f}" for n in names)
                )
            for name, values in p50s.items():
                out[f"{name}_p50_us"] = min(values)
                out[f"{name}_median_block_p50_us"] = statistics.median(values)
            out["rest"] = {"p50_us": out["rest_p50_us"]}
            floor_cps = [run_floor(binaries, tput_calls, p, cwd=cwd)["calls_per_s"] for p in (1, 2)]
            out["floor_best_cps"] = max(floor_cps)
            bare_port = free_port()
            with serve_bare(skills, root / "data-bare", bare_port) as bare_proc:
                bare = Server(bare_proc, bare_port, "")
                asyncio.run(rest_throughput(bare, min(200, tput_calls), 8))  # warm-up
                sides_t = {"rest": server, "bare": bare}
                levels: dict[str, dict[int, float]] = {"rest": {}, "bare": {}}
                level_p50: dict[str, dict[int, float]] = {"rest": {}, "bare": {}}
                for r in range(rounds):
                    for level in LEVELS:
                        order = ["rest", "bare"] if (r + level) % 2 == 0 else ["bare", "rest"]
                        for side in order:
                            rps, p50 = asyncio.run(
                                rest_throughput(sides_t[side], tput_calls, level)
                            )
                            if rps > levels[side].get(level, 0.0):
                                levels[side][level], level_p50[side][level] = rps, p50
                # Where REST's cost goes: the server's own CPU per request, beside the floor's
                # and beside serve with each call's writes stubbed out (rest_nostore.py).
                nostore_program = [sys.executable, str(Path(__file__).with_name("rest_nostore.py"))]
                with serve(skills, root / "data-nostore", program=nostore_program) as nostore:
                    asyncio.run(rest_throughput(nostore, min(200, tput_calls), 8))  # warm-up
                    cpu_sides = {"rest": server, "bare": bare, "nostore": nostore}
                    cpu: dict[str, tuple[float, float]] = {}
                    for name in ("rest", "bare", "nostore", "nostore", "bare", "rest"):
                        found = cpu_pass(cpu_sides[name], tput_calls)
                        if name not in cpu or found[1] < cpu[name][1]:
                            cpu[name] = found
                out["cpu_pass"] = {k: {"rps": v[0], "cpu_us": v[1]} for k, v in cpu.items()}
                eprint(
                    "server CPU per request at 8 clients: "
                    + ", ".join(f"{k} {v[1]:.0f} µs ({v[0]:.0f} req/s)" for k, v in cpu.items())
                )
            for level in LEVELS:
                eprint(
                    f"c={level}: REST {levels['rest'][level]:.0f} req/s "
                    f"(p50 {level_p50['rest'][level]:.0f} µs), bare FastAPI "
                    f"{levels['bare'][level]:.0f} req/s (p50 {level_p50['bare'][level]:.0f} µs)"
                    f" → {levels['rest'][level] / levels['bare'][level]:.2f}×"
                )
            out["rest_levels"] = levels["rest"]
            out["rest_level_p50_us"] = level_p50["rest"]
            out["bare_levels"] = levels["bare"]
            out["bare_level_p50_us"] = level_p50["bare"]
            out["rest_best_rps"] = max(levels["rest"].values())
            out["bare_best_rps"] = max(levels["bare"].values())
            out["level_ratios"] = {
                level: levels["rest"][level] / levels["bare"][level] for level in LEVELS
            }
            if leak_calls:
                fds_before = fd_count(server.proc.pid)
                asyncio.run(rest_throughput(server, leak_calls, 4))
                out["leaks"] = {
                    "calls": leak_calls,
                    "fds_before": fds_before,
                    "fds_after": fd_count(server.proc.pid),
                    **child_processes(server.proc.pid),
                }
                eprint(f"leaks: {out['leaks']}")
        if listing:
            many = root / "many"
            write_many(many, listing)
            with serve(many, root / "data-many") as server:
                times = []
                for _ in range(20):
                    started = time.perf_counter()
                    status, body = request(server.port, "GET", "/v1/skills", server.token)
                    times.append((time.perf_counter() - started) * 1000)
                    assert status == 200 and json.loads(body)["total"] == listing
                out["listing"] = {"skills": listing, "p50_ms": statistics.median(times)}
                eprint(f"GET /v1/skills ({listing}): {out['listing']['p50_ms']:.1f} ms")
    out["targets"] = {
        "rest_p50_over_runner_ms": (out["rest"]["p50_us"] - out["runner_p50_us"]) / 1000,
        "rest_p50_ok": out["rest"]["p50_us"] <= out["runner_p50_us"] + 1500,
        "rest_tput_ratio": min(out["level_ratios"].values()),
        "rest_tput_ok": min(out["level_ratios"].values()) >= REST_TPUT_BAR,
        "rest_tput_c_ratio": out["rest_best_rps"] / out["floor_best_cps"],
    }
    if "listing" in out:
        out["targets"]["listing_ok"] = out["listing"]["p50_ms"] <= 100
    if "leaks" in out:
        leaks = out["leaks"]
        out["targets"]["no_leak"] = (
            leaks["zombies"] == 0 and leaks["fds_after"] <= leaks["fds_before"] + 2
        )
    return out


def report_lines(res: dict[str, Any]) -> list[str]:
    t = res["targets"]
    lines = [
        "| REST measure | figure | target | met |",
        "|---|---|---|---|",
        f"| C floor p50 / best calls/s | {res['floor_p50_us']:.0f} µs / "
        f"{res['floor_best_cps']:.0f} | — | — |",
        f"| runner p50 (same run) | {res['runner_p50_us']:.0f} µs | — | — |",
        f"| `POST …/execute` p50 | {res['rest']['p50_us']:.0f} µs "
        f"(runner + {t['rest_p50_over_runner_ms']:.2f} ms) | ≤ runner + 1.5 ms | "
        f"{'yes' if t['rest_p50_ok'] else 'NO'} |",
        f"| `POST …/execute` best req/s | {res['rest_best_rps']:.0f} "
        f"({t['rest_tput_ratio']:.2f}× bare FastAPI, {t['rest_tput_c_ratio']:.2f}× C) | "
        f"≥ {REST_TPUT_BAR}× bare | {'yes' if t['rest_tput_ok'] else 'NO'} |",
        *(
            f"| … with {level} client{'s' if level > 1 else ''}: req/s, p50 | {rps:.0f}, "
            f"{res['rest_level_p50_us'][level]:.0f} µs; bare {res['bare_levels'][level]:.0f}, "
            f"{res['bare_level_p50_us'][level]:.0f} µs ({res['level_ratios'][level]:.2f}×) "
            "| — | info |"
            for level, rps in res["rest_levels"].items()
        ),
    ]
    if "listing" in res:
        lines.append(
            f"| `GET /v1/skills`, {res['listing']['skills']} skills, p50 | "
            f"{res['listing']['p50_ms']:.1f} ms | ≤ 100 ms | "
            f"{'yes' if t['listing_ok'] else 'NO'} |"
        )
    if "leaks" in res:
        leaks = res["leaks"]
        lines.append(
            f"| after {leaks['calls']} executions: zombies, server fds | {leaks['zombies']}, "
            f"{leaks['fds_before']} → {leaks['fds_after']} | 0, no growth | "
            f"{'yes' if t['no_leak'] else 'NO'} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="serial calls per block and side")
    parser.add_argument("--blocks", type=int, default=6, help="serial blocks per side")
    parser.add_argument("--tput-calls", type=int, default=1000, help="calls per level")
    parser.add_argument("--leak-calls", type=int, default=10000)
    parser.add_argument("--listing", type=int, default=10000, help="skills for GET /v1/skills")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        res = run(args.calls, args.tput_calls, args.leak_calls, args.listing, args.blocks)
    except SkipBench as exc:
        print(f"SKIPPED: {exc}")
        return 0
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print("\n".join(report_lines(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
