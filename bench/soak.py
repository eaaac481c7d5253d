"""Soak: 1,000 mixed calls through REST with 8 clients while the registry reloads every second.

A real ``ongrid-skills serve`` on loopback, four small skills written into a temp dir:

- ``ok``      a shell script that echoes JSON (succeeds)
- ``fail``    exits 1 with a line on stderr (fails)
- ``slow``    sleeps 30 s under a 1 s timeout (timed out, its process group killed)
- ``change``  mutating: the call waits for an approval, which a second operator token signs

Each call carries its index in its args, so every one can be found again. An admin token posts
``/v1/reload`` every second while the clients run. Then, once every execution is final:

- no record lost: every submitted call has exactly one execution row, final, with the status its
  skill gives (counts by status match what was sent), every approval approved by the second token;
- the audit chain verifies (``GET /v1/audit/verify`` while serving, ``ongrid-skills audit
  verify`` on the data dir after the server stopped);
- no zombie and no leftover child of the server, no process left running in a skill folder;
- no fd growth in the server process (``/proc/<pid>/fd`` after a warm-up, and at the end).

Bounded: ``--calls`` calls, each request times out after 60 s, and the whole run after
``--deadline`` seconds (default 300), after which it stops and fails. Loopback only. Exit 0 when
every check holds, 1 otherwise. Not run by ``make test``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

CLI = Path(sys.executable).with_name("ongrid-skills")
#: Share of each kind of call, and the status its execution must end with.
MIX = {"ok": 0.55, "fail": 0.20, "slow": 0.05, "change": 0.20}
EXPECTED = {"ok": "succeeded", "fail": "failed", "slow": "timed_out", "change": "succeeded"}
SKILLS = {
    "ok": ("#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n", {}),
    "fail": ("#!/bin/sh\ncat >/dev/null\necho 'no luck' >&2\nexit 1\n", {}),
    "slow": ("#!/bin/sh\ncat >/dev/null\nexec sleep 30\n", {"timeout_seconds": 1}),
    "change": ("#!/bin/sh\ncat >/dev/null\necho '{\"changed\": true}'\n", {"class": "mutating"}),
}
FINAL = {
    "succeeded",
    "failed",
    "timed_out",
    "invalid_args",
    "output_too_large",
    "cancelled",
    "denied",
    "rejected",
    "expired",
    "interrupted",
}


@dataclass
class Tally:
    """What was sent and what came back."""

    sent: Counter[str] = field(default_factory=Counter)
    ids: dict[int, str] = field(default_factory=dict)  # call index → execution id
    kinds: dict[int, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    approvals: int = 0
    reloads: int = 0
    reload_errors: list[str] = field(default_factory=list)


def write_skills(root: Path) -> None:
    for name, (script, extra) in SKILLS.items():
        folder = root / name
        folder.mkdir(parents=True)
        entry = folder / "run"
        entry.write_text(script)
        entry.chmod(entry.stat().st_mode | stat.S_IXUSR)
        manifest = {"name": name, "description": f"soak {name}", "entry": "run", **extra}
        (folder / "skill.json").write_text(json.dumps(manifest))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_token(env: dict[str, str], role: str, name: str) -> str:
    out = subprocess.run(
        [str(CLI), "token", "create", "--role", role, "--name", name],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip().splitlines()[-1]


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def children(pid: int) -> Counter[str]:
    """The server's children by state (``Z`` = zombie)."""
    found: Counter[str] = Counter()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            data = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        if int(fields[1]) == pid:
            found[fields[0].decode()] += 1
    return found


def running_in(folder: Path) -> list[int]:
    """Processes whose working directory is under ``folder`` (skills run in their folder)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(folder)):
            pids.append(int(name))
    return pids


def plan(calls: int, seed: int) -> list[str]:
    """The kinds of the calls, shuffled with a fixed seed, in the proportions of MIX."""
    kinds = [kind for kind, share in MIX.items() for _ in range(round(calls * share))]
    kinds = (kinds + ["ok"] * calls)[:calls]
    random.Random(seed).shuffle(kinds)
    return kinds


async def one_call(
    client: httpx.AsyncClient, signer: dict[str, str], index: int, kind: str, tally: Tally
) -> None:
    answer = await client.post(f"/v1/skills/{kind}/execute", json={"args": {"i": index}})
    if answer.status_code not in (200, 202):
        tally.errors.append(f"call {index} ({kind}): {answer.status_code} {answer.text[:200]}")
        return
    body = answer.json()
    tally.ids[index] = body["id"]
    if kind == "change":
        if body.get("status") != "pending_approval":
            tally.errors.append(f"call {index}: expected pending_approval, got {body['status']}")
            return
        signed = await client.post(
            f"/v1/approvals/{body['approval_id']}/approve", json={}, headers=signer
        )
        if signed.status_code != 200:
            tally.errors.append(f"approve {index}: {signed.status_code} {signed.text[:200]}")
            return
        tally.approvals += 1


async def clients(
    url: str, tokens: dict[str, str], kinds: list[str], concurrency: int, deadline: float
) -> Tally:
    tally = Tally()
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
    for index, kind in enumerate(kinds):
        queue.put_nowait((index, kind))
    signer = {"Authorization": f"Bearer {tokens['signer']}"}
    done = asyncio.Event()

    async def worker() -> None:
        headers = {"Authorization": f"Bearer {tokens['caller']}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            while time.monotonic() < deadline:
                try:
                    index, kind = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                tally.sent[kind] += 1
                tally.kinds[index] = kind
                try:
                    await one_call(client, signer, index, kind, tally)
                except httpx.HTTPError as exc:
                    tally.errors.append(f"call {index} ({kind}): {type(exc).__name__} {exc}")

    async def reloader() -> None:
        headers = {"Authorization": f"Bearer {tokens['admin']}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            while not done.is_set() and time.monotonic() < deadline:
                try:
                    answer = await client.post("/v1/reload")
                    if answer.status_code == 200:
                        tally.reloads += 1
                    else:
                        tally.reload_errors.append(f"{answer.status_code} {answer.text[:200]}")
                except httpx.HTTPError as exc:
                    tally.reload_errors.append(f"{type(exc).__name__} {exc}")
                with contextlib.suppress(TimeoutError):  # a reload a second until done
                    await asyncio.wait_for(done.wait(), timeout=1.0)

    reloading = asyncio.create_task(reloader())
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    done.set()
    await reloading
    if not queue.empty():
        tally.errors.append(f"deadline reached with {queue.qsize()} calls never sent")
    return tally


def all_rows(url: str, token: str) -> list[dict[str, Any]]:
    """Every execution row, page by page."""
    rows: list[dict[str, Any]] = []
    cursor = None
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        while True:
            params: dict[str, Any] = {"limit": 500}
            if cursor:
                params["cursor"] = cursor
            page = client.get("/v1/executions", params=params).json()
            rows.extend(page["items"])
            cursor = page["next_cursor"]
            if not cursor:
                return rows


def wait_final(url: str, token: str, deadline: float) -> list[dict[str, Any]]:
    """The rows once none is still running or pending (or the deadline has passed)."""
    while True:
        rows = all_rows(url, token)
        if all(r["status"] in FINAL for r in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def warm_up(url: str, tokens: dict[str, str], concurrency: int) -> None:
    """A small concurrent burst of every kind and a reload, so that lazily opened fds (store
    connections, thread pools) exist before the fd baseline is taken."""
    kinds = ["ok", "fail", "change", "slow"] * concurrency
    asyncio.run(clients(url, tokens, kinds, concurrency, time.monotonic() + 120))


def check(
    tally: Tally, rows: list[dict[str, Any]], warm: set[str], approvals: dict[str, dict[str, Any]]
) -> tuple[list[str], Counter[str]]:
    """Problems found, and the final rows of the soak by status."""
    problems = list(tally.errors) + [f"reload: {e}" for e in tally.reload_errors]
    soak = [r for r in rows if r["id"] not in warm]
    by_index: dict[int, list[dict[str, Any]]] = {}
    for row in soak:
        by_index.setdefault(row["args"]["i"], []).append(row)
    for index, kind in tally.kinds.items():
        found = by_index.get(index, [])
        if len(found) != 1:
            problems.append(f"call {index} ({kind}): {len(found)} rows")
            continue
        row = found[0]
        if tally.ids.get(index) not in (None, row["id"]):
            problems.append(f"call {index}: answered id {tally.ids[index]}, row {row['id']}")
        if row["status"] != EXPECTED[kind]:
            problems.append(f"call {index} ({kind}): status {row['status']} {row.get('error')}")
        if kind == "change":
            approval = approvals.get(row.get("approval_id") or "", {})
            signers = [s["principal"] for s in approval.get("signatures", [])]
            if approval.get("status") != "approved" or signers != ["soak_signer"]:
                problems.append(f"call {index}: approval {approval.get('status')} by {signers}")
    if len(soak) != len(tally.kinds):
        problems.append(f"{len(soak)} rows for {len(tally.kinds)} calls sent")
    statuses = Counter(r["status"] for r in soak)
    wanted = Counter(EXPECTED[k] for k in tally.kinds.values())
    if statuses != wanted:
        problems.append(f"rows by status {dict(statuses)} != sent {dict(wanted)}")
    return problems, statuses


def approvals_of(url: str, token: str, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each approval a row points at, by id (one GET each: the listing stops at 500)."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        return {
            r["approval_id"]: client.get(f"/v1/approvals/{r['approval_id']}").json()
            for r in rows
            if r.get("approval_id")
        }


def run(calls: int, concurrency: int, deadline_s: float, seed: int) -> dict[str, Any]:
    start = time.monotonic()
    deadline = start + deadline_s
    with tempfile.TemporaryDirectory(prefix="ongrid-soak-") as tmp:
        base = Path(os.path.realpath(tmp))
        skills, data = base / "skills", base / "data"
        write_skills(skills)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "ONGRID_DATA_DIR": str(data),
            "ONGRID_BUNDLED_SKILLS": "0",
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        }
        tokens = {
            "caller": create_token(env, "operator", "soak_caller"),
            "signer": create_token(env, "operator", "soak_signer"),
            "admin": create_token(env, "admin", "soak_admin"),
        }
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [str(CLI), "-q", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while True:
                try:
                    if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("serve did not start")
                time.sleep(0.05)
            warm_up(url, tokens, concurrency)
            warm = {r["id"] for r in wait_final(url, tokens["caller"], deadline)}
            fds_before = fd_count(proc.pid)
            began = time.monotonic()
            tally = asyncio.run(clients(url, tokens, plan(calls, seed), concurrency, deadline))
            sent_in = time.monotonic() - began
            rows = wait_final(url, tokens["caller"], deadline)
            finished_in = time.monotonic() - began
            approvals = approvals_of(url, tokens["caller"], rows)
            headers = {"Authorization": f"Bearer {tokens['caller']}"}
            verify = httpx.get(f"{url}/v1/audit/verify", headers=headers, timeout=120).json()
            fds_after = fd_count(proc.pid)
            kids = children(proc.pid)
            leftovers = running_in(skills)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        cli_verify = subprocess.run(
            [str(CLI), "audit", "verify"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    problems, statuses = check(tally, rows, warm, approvals)
    if verify.get("ok") is not True or verify.get("problems"):
        problems.append(f"audit verify (REST): {verify}")
    if cli_verify.returncode != 0:
        problems.append(f"audit verify (CLI): {cli_verify.stdout} {cli_verify.stderr}")
    if fds_after > fds_before:
        problems.append(f"server fds grew: {fds_before} → {fds_after}")
    if kids:
        problems.append(f"server children left: {dict(kids)}")
    if leftovers:
        problems.append(f"processes left in skill folders: {leftovers}")
    return {
        "calls": calls,
        "clients": concurrency,
        "sent": dict(tally.sent),
        "statuses": dict(statuses),
        "approvals_signed": tally.approvals,
        "reloads": tally.reloads,
        "seconds_sending": round(sent_in, 2),
        "seconds_to_all_final": round(finished_in, 2),
        "calls_per_second": round(sum(tally.sent.values()) / sent_in, 1),
        "audit": verify,
        "audit_cli": (cli_verify.stdout + cli_verify.stderr).strip(),
        "server_fds": [fds_before, fds_after],
        "server_children": dict(kids),
        "warm_up_rows": len(warm),
        "problems": problems,
        "load_average": round(os.getloadavg()[0], 2),
        "total_seconds": round(time.monotonic() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--deadline", type=float, default=300, help="seconds for the whole run")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.calls, args.clients, args.deadline, args.seed)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            if key != "problems":
                print(f"{key:>22}: {value}")
        for problem in result["problems"][:50]:
            print(f"PROBLEM: {problem}")
        print("OK" if not result["problems"] else f"FAILED: {len(result['problems'])} problems")
    return 0 if not result["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
