"""Edge workers over NATS: what a remote call costs, and the catalogue of a large fleet.

    .venv/bin/python bench/bench_fleet.py [--calls 1000] [--block 10] [--hosts 200]
                                          [--skills 50] [--workers 8] [--parallel 400]
                                          [--only overhead,decompose,throughput,inventory]
                                          [--json] [--check]

Starts a NATS server of its own (``nats-server -js``, as the tests do: tests/support/nats.py).

- **overhead**: one ``ongrid-skills worker`` process and a manager (``open_manager``, in this
  process, on the loop ``serve`` runs on: uvloop) with the same trivial skill twice: ``noop``
  (``scope: host``, run by the worker) and ``noop_local`` (run by the manager's own runner).
  ``Manager.submit`` waited to the end, in pairs of blocks of ``--block`` calls (remote then
  local, or local then remote: the order alternates). The overhead is the median over the pairs
  of p50(remote block) − p50(local block): what the trip manager → NATS → worker → NATS →
  manager adds to a call, measured against the same call under the same moment's load. p50/p99
  of each side over the run are shown too. Bar (SPEC §15): ≤ 2 ms.
- **decompose**: where that time goes, from the stamps of each remote call's timeline
  (dispatched, accepted, running, ended: manager and worker share this machine's clock) and the
  parts timed alone (sign, verify, the ledger's take and finish — on a ledger that took
  :data:`WARM_LEDGER` calls first, as a running worker's —, one JetStream publish).
- **inventory**: ``--hosts`` simulated workers × ``--skills`` skills written straight into the
  hosts bucket (the same skills on every host: one skill per name, each with a ``--hosts``-long
  host enum; and all different: hosts × skills skills), a manager with its REST app following
  them. Figures: reading all the entries (``Hosts.apply``), one merge (``Manager.registry``
  after a host left), and ``GET /v1/skills`` right after it came back (merge + JSON), p50 of
  20 such changes; bar ≤ 100 ms.
- **throughput**: ``--workers`` worker processes, ``--parallel`` calls submitted at once spread
  over them (32 in flight), calls/s; and the same count of local calls, for comparison.

``--check``: exit 1 when a bar is missed (overhead, ``GET /v1/skills``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats
from tests.support.fleet import Fleet
from tests.support.nats import NatsServer, running_nats
from tests.support.server import make_settings, running_app
from tests.support.skills import write_skill

from _common import SkipBench
from ongrid_skills.doors.cli.eventloop import run_until_done
from ongrid_skills.fleet.attest import key_line, load_worker_keys, seal, worker_key
from ongrid_skills.fleet.inventory import hash_of, skills_digest
from ongrid_skills.fleet.signing import manager_key
from ongrid_skills.governance.principal import Principal
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.types import Role

NOOP = "cat >/dev/null\necho '{}'"
TARGET_MS = 100.0
OVERHEAD_TARGET_MS = 2.0
BLOCK = 10  # calls per block of the overhead's pairs
WARM_LEDGER = 600  # calls through the parts' ledger before its take is timed
WHO = Principal("bench", Role.OPERATOR)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def setup(root: Path, server: NatsServer, workers: int) -> tuple[Fleet, Any]:
    """Worker skills (host noop), manager skills (local noop), the fleet and its settings."""
    worker_skills, manager_skills = root / "worker-skills", root / "manager-skills"
    # The same script on both sides (host_skill's would also read its args into a variable:
    # a subshell more, ~1 ms here, once counted as dispatch overhead).
    write_skill(worker_skills, "noop", f"#!/bin/sh\n{NOOP}\n", scope="host")
    write_skill(manager_skills, "noop_local", f"#!/bin/sh\n{NOOP}\n")
    settings = make_settings(
        root, manager_skills, data_dir=str(root / "manager"), nats_url=server.url,
        fleet_prefix="bench", fleet_ttl_seconds=15, max_concurrent_executions=64,
        fleet_worker_keys=str(root / "workers.pub"),
    )  # fmt: skip
    key = manager_key(settings)
    keys = root / "managers.pub"
    keys.write_text(key.public_line + "\n")
    keys.chmod(0o600)
    fleet = Fleet(root, server, "bench", keys, settings)
    for n in range(workers):
        fleet.worker(f"w{n}", worker_skills, ONGRID_FLEET_TTL_SECONDS="15")
    return fleet, settings


async def wait_hosts(manager: Any, count: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        skill = manager.registry.skills.get("noop")
        if skill is not None and len(skill.schema["properties"]["host"]["enum"]) >= count:
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"the manager did not see {count} workers")


async def overhead(settings: Any, calls: int, block: int = BLOCK) -> dict[str, Any]:
    """Paired blocks: ``block`` remote calls then ``block`` local ones, or the other way round
    (the order alternates from pair to pair), until ``calls`` of each. The overhead is the
    median over the pairs of p50(remote block) − p50(local block): a pair shares the machine's
    load of that moment, so what other work does to both sides cancels out, where the
    difference of two run-wide p50s moves with whatever the load did meanwhile."""
    remote: list[float] = []
    local: list[float] = []
    differences: list[float] = []
    async with open_manager(settings, loader_sink=lambda _l: None) as manager:
        await wait_hosts(manager, 1)

        async def timed(name: str, args: dict[str, Any]) -> list[float]:
            out = []
            for _ in range(block):
                started = time.perf_counter()
                done = await manager.submit(name, args, principal=WHO)
                out.append((time.perf_counter() - started) * 1000)
                assert done.ok, done.to_dict()
            return out

        sides = [("noop", {"host": "w0"}), ("noop_local", {})]
        for name, args in sides:  # warm up
            await timed(name, args)
            await timed(name, args)
        for pair in range(max(1, calls // block)):
            first, second = sides if pair % 2 == 0 else sides[::-1]
            a, b = await timed(*first), await timed(*second)
            here, there = (a, b) if first is sides[0] else (b, a)
            remote += here
            local += there
            differences.append(statistics.median(here) - statistics.median(there))
    return {
        "remote_p50_ms": statistics.median(remote),
        "remote_p99_ms": pct(remote, 99),
        "local_p50_ms": statistics.median(local),
        "local_p99_ms": pct(local, 99),
        "overhead_ms": statistics.median(differences),
        "overhead_spread_ms": [pct(differences, 25), pct(differences, 75)],
        "difference_of_p50s_ms": statistics.median(remote) - statistics.median(local),
        "pairs": len(differences),
        "calls": len(remote),
    }


async def decompose(settings: Any, root: Path, calls: int) -> dict[str, Any]:
    """Where a remote call's time goes: phases from its timeline's stamps (the worker's and the
    manager's clocks are this machine's), the same call's spawn-to-exit run locally, and the
    parts timed alone in this process."""
    before, hand, start, run, local_run, back, messages = [], [], [], [], [], [], []

    def stamps(execution_id: str) -> dict[str, float]:
        events = [e for _seq, e in manager.store.executions.events(execution_id)]
        out = {e.type: e.ts for e in events if e.type in ("dispatched", "accepted")}
        statuses = [e.ts for e in events if e.type == "status"]
        out["running"], out["ended"] = statuses[0], statuses[-1]
        out["events"] = len(events)
        return out

    async with open_manager(settings, loader_sink=lambda _l: None) as manager:
        await wait_hosts(manager, 1)
        for _ in range(20):
            await manager.submit("noop", {"host": "w0"}, principal=WHO)
            await manager.submit("noop_local", {}, principal=WHO)
        for _ in range(calls):
            began = time.time()
            done = await manager.submit("noop", {"host": "w0"}, principal=WHO)
            ended = time.time()
            t = stamps(done.id)
            before.append((t["dispatched"] - began) * 1000)
            hand.append((t["accepted"] - t["dispatched"]) * 1000)
            start.append((t["running"] - t["accepted"]) * 1000)
            run.append((t["ended"] - t["running"]) * 1000)
            back.append((ended - t["ended"]) * 1000)
            messages.append(t["events"])
            here = stamps((await manager.submit("noop_local", {}, principal=WHO)).id)
            local_run.append((here["ended"] - here["running"]) * 1000)
    return {
        "before_p50_ms": statistics.median(before),
        "hand_over_p50_ms": statistics.median(hand),
        "worker_start_p50_ms": statistics.median(start),
        "worker_run_p50_ms": statistics.median(run),
        "local_run_p50_ms": statistics.median(local_run),
        "back_p50_ms": statistics.median(back),
        "events_per_call": statistics.median(messages),
        **await parts(settings, root),
    }


async def parts(settings: Any, root: Path, n: int = 300) -> dict[str, float]:
    """Each part alone, p50 in ms: sign, verify, the ledger's take and finish (a file on the
    same disk as the worker's), one JetStream publish waiting for its acknowledgement."""
    from ongrid_skills.fleet.nonces import Ledger
    from ongrid_skills.fleet.signing import Call, new_nonce, sign, verify
    from ongrid_skills.packs.keys import parse_trusted_keys

    key = manager_key(settings)
    trusted = parse_trusted_keys(key.public_line)
    out: dict[str, list[float]] = {"sign": [], "verify": [], "take": [], "finish": [], "js": []}
    ledger = Ledger(str(root / "bench-ledger"))
    # A running worker's ledger reuses its WAL file once it was checkpointed (some 250 calls
    # in): a take then overwrites it, where a new ledger's first takes grow it (slower).
    now = time.time()
    for i in range(WARM_LEDGER):
        warm = Call(
            kind="call", id=f"warm{i}", host="w0", skill="noop", definition_hash="0" * 64,
            skill_class="safe", signatures=0, args={}, nonce=new_nonce(), issued_at=now,
            expires_at=now + 60, reply="bench.reply",
        )  # fmt: skip
        ledger.take(warm, now)
        ledger.finish(warm.id, "succeeded")
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await js.add_stream(name="benchparts", subjects=["benchparts.>"])
    try:
        for i in range(n):
            now = time.time()
            call = Call(
                kind="call", id=f"bench{i}", host="w0", skill="noop", definition_hash="0" * 64,
                skill_class="safe", signatures=0, args={}, nonce=new_nonce(), issued_at=now,
                expires_at=now + 60, reply="bench.reply",
            )  # fmt: skip
            t0 = time.perf_counter()
            body, headers = sign(key, call)
            t1 = time.perf_counter()
            verify(body, headers, trusted)
            t2 = time.perf_counter()
            ledger.take(call, now)
            t3 = time.perf_counter()
            ledger.finish(call.id, "succeeded")
            t4 = time.perf_counter()
            await js.publish("benchparts.x", body, headers={"Nats-Msg-Id": f"p{i}"})
            t5 = time.perf_counter()
            for name, a, b in (
                ("sign", t0, t1), ("verify", t1, t2), ("take", t2, t3), ("finish", t3, t4),
                ("js", t4, t5),
            ):  # fmt: skip
                out[name].append((b - a) * 1000)
    finally:
        await js.delete_stream("benchparts")
        await nc.close()
        ledger.close()
    return {f"{name}_p50_ms": statistics.median(values) for name, values in out.items()}


async def throughput(settings: Any, workers: int, count: int) -> dict[str, Any]:
    async with open_manager(settings, loader_sink=lambda _l: None) as manager:
        await wait_hosts(manager, workers)
        results = {}
        for label, name, args_of in (
            ("remote", "noop", lambda i: {"host": f"w{i % workers}"}),
            ("local", "noop_local", lambda _i: {}),
        ):
            gate = asyncio.Semaphore(32)

            async def one(
                i: int, name: str = name, args_of: Any = args_of, gate: Any = gate
            ) -> None:
                async with gate:
                    done = await manager.submit(name, args_of(i), principal=WHO)
                    assert done.ok, done.to_dict()

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(count)))
            results[f"{label}_calls_per_s"] = count / (time.perf_counter() - started)
    return {**results, "workers": workers, "calls": count}


def simulated_entries(
    root: Path, hosts: int, skills: int, shared: bool
) -> tuple[list[tuple[str, bytes]], Path]:
    """The hosts' entries, each signed with a key of its own, and the file trusting them."""
    now = time.time()
    out = []
    trusted = root / "simulated-workers.pub"
    lines = []
    for h in range(hosts):
        host = f"sim-{h:04d}"
        key = worker_key(Settings(data_dir=str(root / "simulated" / host)))
        lines.append(key_line(host, key))
        records = []
        for s in range(skills):
            name = f"skill_{s:03d}" if shared else f"skill_{h:04d}_{s:03d}"
            schema = {
                "type": "object",
                "properties": {"path": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["path"],
            }
            record = {
                "name": name, "description": f"{name} on a host",
                "class": "safe", "kind": "subprocess", "category": "host", "schema": schema,
                "timeout_seconds": 30, "when_to_use": None, "confirmation_required": False,
                "env_allow": [], "entry": f"{s:064x}", "builtin": None,
            }  # fmt: skip
            records.append({**record, "definition_hash": hash_of(record)})
        body = {
            "host": host, "instance": f"i{h}", "pid": h, "version": "bench",
            "labels": {"rack": f"r{h % 10}"}, "ttl": 3600.0, "started_at": now,
            "heartbeat_at": now, "running": 0, "skills_digest": skills_digest(records),
            "skills": records,
        }  # fmt: skip
        out.append((host, seal(key, json.dumps(body).encode())))
    trusted.write_text("\n".join(lines) + "\n")
    trusted.chmod(0o600)
    return out, trusted


async def fill_bucket(url: str, prefix: str, entries: list[tuple[str, bytes]]) -> None:
    from ongrid_skills.fleet import bus

    nc = await nats.connect(url)
    try:
        kv = await bus.ensure(nc.jetstream(), bus.Names(prefix), 3600)
        for host, value in entries:
            await kv.put(host, value)
    finally:
        await nc.close()


def inventory(root: Path, nats_url: str, hosts: int, skills: int) -> dict[str, Any]:
    from ongrid_skills.fleet.catalogue import Hosts

    out: dict[str, Any] = {"hosts": hosts, "skills_per_host": skills}
    for shared in (True, False):
        label = "shared" if shared else "distinct"
        entries, trusted = simulated_entries(root / label, hosts, skills, shared)
        fresh = Hosts(time.monotonic, load_worker_keys(str(trusted)))
        started = time.perf_counter()
        for host, value in entries:
            fresh.apply(host, value)
        out[f"{label}_apply_all_ms"] = (time.perf_counter() - started) * 1000
        prefix = f"inv{label}"
        asyncio.run(fill_bucket(nats_url, prefix, entries))
        settings = make_settings(
            root, root / "empty", data_dir=str(root / f"inv-{label}"), nats_url=nats_url,
            fleet_prefix=prefix, fleet_ttl_seconds=3600, fleet_worker_keys=str(trusted),
        )  # fmt: skip
        (root / "empty").mkdir(exist_ok=True)
        with running_app(settings) as server:
            manager = server.manager
            deadline = time.monotonic() + 60
            while len(manager.fleet.hosts.hosts) < hosts and time.monotonic() < deadline:
                time.sleep(0.05)
            expected = skills if shared else hosts * skills
            assert len(manager.registry) == expected, (len(manager.registry), expected)
            merges, gets = [], []
            hosts_view = manager.fleet.hosts
            for n in range(20):
                # One host leaves, then comes back: what changes the offer in a live fleet.
                host, value = entries[n % len(entries)]
                hosts_view.remove(host)
                started = time.perf_counter()
                _ = manager.registry
                merges.append((time.perf_counter() - started) * 1000)
                hosts_view.apply(host, value)
                started = time.perf_counter()
                response = server.call("GET", "/v1/skills", "vera")
                gets.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200
            out[f"{label}_skills_offered"] = expected
            out[f"{label}_merge_p50_ms"] = statistics.median(merges)
            out[f"{label}_get_skills_p50_ms"] = statistics.median(gets)
            out[f"{label}_get_skills_bytes"] = len(response.content)
            out[f"{label}_ok"] = statistics.median(gets) <= TARGET_MS
    return out


PARTS = ("overhead", "decompose", "throughput", "inventory")


def run_bench(
    calls: int = 1000,
    block: int = BLOCK,
    hosts: int = 200,
    skills: int = 50,
    workers: int = 8,
    parallel: int = 400,
    only: set[str] | None = None,
) -> dict[str, Any]:
    """Every figure of the parts in ``only`` (all by default), the load average and the bars
    missed (``missed``)."""
    if shutil.which("nats-server") is None:
        raise SkipBench("no nats-server on PATH: apt-get install nats-server")
    only = set(PARTS) if only is None else only
    load_start = os.getloadavg()[0]
    results: dict[str, Any] = {}
    with running_nats() as server, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fleet, settings = setup(root, server, workers if "throughput" in only else 1)
        try:
            if "overhead" in only:
                results["overhead"] = run_until_done(overhead(settings, calls, block))
            if "decompose" in only:
                results["decompose"] = run_until_done(decompose(settings, root, calls // 2))
            if "throughput" in only:
                results["throughput"] = run_until_done(throughput(settings, workers, parallel))
        finally:
            for worker in fleet.workers:
                worker.stop()
        if "inventory" in only:
            results["inventory"] = inventory(root, server.url, hosts, skills)
    results["load_average"] = [load_start, os.getloadavg()[0]]
    missed = []
    if "overhead" in results and results["overhead"]["overhead_ms"] > OVERHEAD_TARGET_MS:
        missed.append("remote-call overhead")
    missed += [
        f"GET /v1/skills ({label})"
        for label in ("shared", "distinct")
        if "inventory" in results and not results["inventory"][f"{label}_ok"]
    ]
    results["missed"] = missed
    return results


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--block", type=int, default=BLOCK, help="calls per block (overhead)")
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--skills", type=int, default=50)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--parallel", type=int, default=400)
    parser.add_argument(
        "--only", default=",".join(PARTS), help=f"parts to run, comma-separated: {','.join(PARTS)}"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 when a bar is missed")
    options = parser.parse_args()
    only = set(options.only.split(","))
    if only - set(PARTS):
        parser.error(f"--only: unknown part(s) {', '.join(sorted(only - set(PARTS)))}")
    try:
        results = run_bench(
            options.calls,
            options.block,
            options.hosts,
            options.skills,
            options.workers,
            options.parallel,
            only,
        )
    except SkipBench as exc:
        print(f"SKIPPED: {exc}")
        return 1 if options.check else 0
    missed = results["missed"]
    if options.json:
        print(json.dumps(results, indent=2))
    else:
        print("\n".join(report_lines(results)))
        if missed:
            print(f"missed: {', '.join(missed)}")
    return 1 if options.check and missed else 0


def report_lines(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    lines.append("load average {:.2f} → {:.2f}".format(*results["load_average"]))
    if "overhead" in results:
        o = results["overhead"]
        low, high = o["overhead_spread_ms"]
        lines.append(
            f"remote call  p50 {o['remote_p50_ms']:.2f} ms  p99 {o['remote_p99_ms']:.2f} ms"
        )
        lines.append(f"local call   p50 {o['local_p50_ms']:.2f} ms  p99 {o['local_p99_ms']:.2f} ms")
        ok = o["overhead_ms"] <= OVERHEAD_TARGET_MS
        lines.append(
            f"overhead     {o['overhead_ms']:.2f} ms: median of {o['pairs']} paired blocks' "
            f"p50 differences (quartiles {low:.2f}–{high:.2f} ms; {o['calls']} calls each side) "
            f"{'ok' if ok else 'over'} (≤ {OVERHEAD_TARGET_MS:.0f} ms); "
            f"p50 remote − p50 local {o['difference_of_p50s_ms']:.2f} ms"
        )
    if "decompose" in results:
        d = results["decompose"]
        lines.append(
            f"  phases p50: submit → dispatched {d['before_p50_ms']:.2f} ms, "
            f"hand-over (dispatched → accepted) {d['hand_over_p50_ms']:.2f} ms, "
            f"checks (accepted → running) {d['worker_start_p50_ms']:.2f} ms, "
            f"the skill on the worker (running → ended) {d['worker_run_p50_ms']:.2f} ms "
            f"(here {d['local_run_p50_ms']:.2f} ms), "
            f"back (ended → outcome here) {d['back_p50_ms']:.2f} ms; "
            f"{d['events_per_call']:.0f} events a call"
        )
        lines.append(
            f"  parts p50: sign {d['sign_p50_ms']:.3f} ms, verify {d['verify_p50_ms']:.3f} ms, "
            f"ledger take {d['take_p50_ms']:.3f} ms, ledger finish {d['finish_p50_ms']:.3f} ms, "
            f"one JetStream publish {d['js_p50_ms']:.3f} ms"
        )
    if "throughput" in results:
        t = results["throughput"]
        lines.append(
            f"throughput   {t['remote_calls_per_s']:.0f} calls/s on {t['workers']} workers, "
            f"{t['local_calls_per_s']:.0f} calls/s local ({t['calls']} calls, 32 in flight)"
        )
    if "inventory" in results:
        i = results["inventory"]
        for label in ("shared", "distinct"):
            lines.append(
                f"inventory {label:8} {i['hosts']}×{i['skills_per_host']}: "
                f"{i[f'{label}_skills_offered']} skills offered, "
                f"apply all {i[f'{label}_apply_all_ms']:.0f} ms, merge p50 "
                f"{i[f'{label}_merge_p50_ms']:.1f} ms, GET /v1/skills p50 "
                f"{i[f'{label}_get_skills_p50_ms']:.1f} ms "
                f"({i[f'{label}_get_skills_bytes'] // 1024} KiB) "
                f"{'ok' if i[f'{label}_ok'] else 'over'} (≤ {TARGET_MS:.0f} ms)"
            )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
