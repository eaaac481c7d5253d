"""Run every benchmark in one process, sequentially, and print a markdown summary table.

    .venv/bin/python bench/run_all.py                  # what `make bench` runs
    .venv/bin/python bench/run_all.py --quick          # a smoke run with small counts
    .venv/bin/python bench/run_all.py --update-readme  # also rewrite the figures in README.md
    .venv/bin/python bench/run_all.py --check          # exit 1 when any bar is missed

The table is the one in bench/README.md, between the ``figures`` markers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cli_start
import bench_fleet
import bench_leaks
import bench_loader
import bench_masking
import bench_mcp
import bench_replicas
import bench_rest
import bench_runner
import bench_sandbox
from _common import BENCH_DIR, SkipBench, code_version, eprint, load_average, machine_line

#: Following a call from another replica must not raise the rows written per call; each
#: replica's lease heartbeats (a row each, on their own clock) land in either half of the run.
ROWS_TOLERANCE = 1.05
START_MARK = "<!-- figures:start -->"
END_MARK = "<!-- figures:end -->"


def _v(ok: bool) -> str:
    return "✅ pass" if ok else "❌ **miss**"


def runner_rows(r: dict[str, Any]) -> list[str]:
    fl, ru = r["floor"], r["runner"]
    rows = [
        f"| Runner, one call (p50, concurrency 1, on {r.get('loop', 'asyncio')})"
        f" | {ru['p50_us']:,.0f} µs"
        f" | {fl['p50_us']:,.0f} µs (C, serial) | {r['runner_call_ratio']:.2f}×"
        f" (median blocks {r['runner_call_ratio_median']:.2f}×)"
        f" | ≤ {bench_runner.TARGET_CALL_RATIO}× | {_v(r['runner_call_ok'])} |",
        f"| Runner throughput (best of concurrency 1–32) | {ru['best_cps']:,.0f} calls/s"
        f" (at {ru['best_concurrency']}) | {fl['best_cps']:,.0f} calls/s"
        f" (C, {fl['best_concurrency']} parent{'s' if fl['best_concurrency'] > 1 else ''})"
        f" | {r['runner_throughput_ratio']:.2f}× | ≥ {bench_runner.TARGET_THROUGHPUT_RATIO}×"
        f" | {_v(r['runner_throughput_ok'])} |",
        f"| Parent CPU per call (serial) | {ru['parent_cpu_us']:,.0f} µs"
        f" | {fl['parent_cpu_us']:,.0f} µs | {ru['parent_cpu_us'] / fl['parent_cpu_us']:.1f}×"
        " | — | info |",
    ]
    if "execute" in r:
        ex = r["execute"]
        rows += [
            f"| `execute()`, one call (p50) | {ex['p50_us']:,.0f} µs"
            f" | runner {ru['p50_us']:,.0f} µs | {r['execute_minus_runner_us']:+,.0f} µs"
            f" ({r['execute_call_ratio']:.2f}× C) | REST bar: ≤ runner + 1,500 µs"
            f" | {_v(r['execute_minus_runner_us'] <= 1500)} |",
            f"| `execute()` throughput (best) | {ex['best_cps']:,.0f} calls/s"
            f" (at {ex['best_concurrency']}) | {fl['best_cps']:,.0f} calls/s (C)"
            f" | {r['execute_throughput_ratio']:.2f}× | — | info |",
        ]
    return rows


def sandbox_rows(r: dict[str, Any]) -> list[str]:
    p50, ratio = r["p50_us"], r["ratio_to_plain"]
    return [
        f"| Sandbox `{side}`: one call (p50) | {p50[side]:,.0f} µs"
        f" | plain runner {p50['plain']:,.0f} µs (same blocks) | {ratio[side]:.2f}×"
        + (
            f" | ≤ {bench_sandbox.TARGET_STRICT_RATIO}× | {_v(r['strict_ok'])} |"
            if side == "strict"
            else " | — | info |"
        )
        for side in ("strict", "host-read")
    ]


def masking_rows(r: dict[str, Any]) -> list[str]:
    scan, call = r["scan"], r["call"]
    return [
        f"| Masking: a call given a credential, its output masked (p50) | "
        f"{call['masked_p50_us']:,.0f} µs | the same call without a masker "
        f"{call['plain_p50_us']:,.0f} µs (same blocks) | "
        f"{call['masked_p50_us'] / call['plain_p50_us']:.2f}× ({call['added_us']:+,.0f} µs) "
        "| — | info |",
        f"| … masking 1 MiB of output | {scan['mask_mb_s']:,.0f} MB/s | one `bytes.find`"
        f" {scan['floor_mb_s']:,.0f} MB/s | {scan['floor_mb_s'] / scan['mask_mb_s']:.1f}× slower"
        " | — | info |",
    ]


def loader_rows(r: dict[str, Any]) -> list[str]:
    rows = []
    for row in r["sizes"]:
        rows.append(
            f"| Loader, {row['skills']:,} external skills (fresh process, warm page cache,"
            f" best of {r['repeat']}) | {row['load_ms']:,.1f} ms"
            f" | {row['floor_ms']:,.1f} ms (walk+parse+containment)"
            f" | {row['ratio']:.2f}× | ≤ {bench_loader.TARGET_RATIO}× | {_v(row['ok'])} |"
        )
        rows.append(
            f"| … same, reload in a warm process | {row['reload_ms']:,.1f} ms"
            f" | {row['reload_floor_ms']:,.1f} ms | {row['reload_ratio']:.2f}× | — | info |"
        )
        rows.append(
            f"| … same, first load with its INFO log lines formatted | {row['load_logged_ms']:,.1f}"
            f" ms | {row['floor_ms']:,.1f} ms | {row['load_logged_ms'] / row['floor_ms']:.2f}×"
            " | — | info |"
        )
    if "memory" in r:
        m = r["memory"]
        rows.append(
            f"| Registry memory, {m['skills']:,} skills | {m['tracemalloc_kib_per_skill']:.2f}"
            f" KiB/skill (tracemalloc), {m['rss_kib_per_skill']:.2f} KiB/skill (RSS)"
            f" | — | — | ≤ {bench_loader.TARGET_KIB_PER_SKILL} KiB/skill | {_v(m['ok'])} |"
        )
    return rows


def leak_rows(r: dict[str, Any]) -> list[str]:
    io = r["in_loop"]
    return [
        f"| No leak after {r['calls']:,} runner calls (concurrency {r['concurrency']})"
        f" | fds {io['before']['fds']} → {io['after']['fds']}, zombies"
        f" {r['zombies_after']}, children left {r['children_alive_after']}"
        " | — | — | no fd growth, no zombie | " + _v(r["ok"]) + " |"
    ]


def cli_rows(r: dict[str, Any]) -> list[str]:
    sides = r["sides"]
    floor = sides["floor"]["wall"]
    rows = []
    for label, side in sides.items():
        if label == "floor":
            continue
        wall = side["wall"]
        target = side.get("target_above_floor_s")
        rows.append(
            f"| CLI start: `ongrid-skills {label}` (wall median of {r['repeat']}; p90; CPU)"
            f" | {wall['median'] * 1000:,.0f} ms; p90 {wall['p90'] * 1000:,.0f} ms;"
            f" CPU {side['cpu']['median'] * 1000:,.0f} ms"
            f" | {floor['median'] * 1000:,.0f} ms (`python -c pass`)"
            f" | floor + {side['above_floor_s']:.3f} s"
            f" | {'≤ floor + ' + str(target) + ' s' if target is not None else '—'}"
            f" | {_v(side['ok']) if 'ok' in side else 'info'} |"
        )
    for label, found in r["imports"].items():
        shown = ", ".join(f"{name} ({ms:.0f} ms)" for name, ms in sorted(found.items()))
        stack = sorted(set(found) & {"fastapi", "sqlalchemy", "alembic", "uvicorn"})
        rows.append(
            f"| … heavy packages `{label}` imports | {shown or 'none'} | — | — | no server stack"
            f" | {_v(not stack)} |"
        )
    return rows


def rest_rows(r: dict[str, Any]) -> list[str]:
    t = r["targets"]
    rows = [
        f"| REST `POST …/execute`, one client (p50) | {r['rest_p50_us']:,.0f} µs"
        f" | runner {r['runner_p50_us']:,.0f} µs, C {r['floor_p50_us']:,.0f} µs (same blocks)"
        f" | runner + {t['rest_p50_over_runner_ms']:.2f} ms | ≤ runner + 1.5 ms"
        f" | {_v(t['rest_p50_ok'])} |",
        f"| REST throughput (best of 1, 8, 32 clients) | {r['rest_best_rps']:,.0f} req/s"
        f" | bare FastAPI endpoint {r['bare_best_rps']:,.0f} req/s; C {r['floor_best_cps']:,.0f}"
        f" calls/s ({t['rest_tput_c_ratio']:.2f}× C)"
        f" | {t['rest_tput_ratio']:.2f}× (worst level) | ≥ 0.85× at each level"
        f" | {_v(t['rest_tput_ok'])} |",
    ]
    for level, rps in r["rest_levels"].items():
        rows.append(
            f"| … {level} client{'s' if int(level) > 1 else ''}: req/s, p50"
            f" | {rps:,.0f} req/s, p50 {r['rest_level_p50_us'][level]:,.0f} µs"
            f" | bare {r['bare_levels'][level]:,.0f} req/s,"
            f" p50 {r['bare_level_p50_us'][level]:,.0f} µs"
            f" | {r['level_ratios'][level]:.2f}× | — | info |"
        )
    if "cpu_pass" in r:
        cpu = r["cpu_pass"]
        rows.append(
            f"| … the server's own CPU per request at 8 clients (where REST's cost goes)"
            f" | REST {cpu['rest']['cpu_us']:,.0f} µs; `serve` with each call's writes stubbed"
            f" {cpu['nostore']['cpu_us']:,.0f} µs | bare {cpu['bare']['cpu_us']:,.0f} µs"
            f" | {cpu['rest']['cpu_us'] / cpu['bare']['cpu_us']:.2f}× | — | info |"
        )
    if "listing" in r:
        rows.append(
            f"| `GET /v1/skills`, {r['listing']['skills']:,} skills (p50)"
            f" | {r['listing']['p50_ms']:.1f} ms | — | — | ≤ 100 ms | {_v(t['listing_ok'])} |"
        )
    if "leaks" in r:
        lk = r["leaks"]
        rows.append(
            f"| Server after {lk['calls']:,} REST executions | fds {lk['fds_before']} →"
            f" {lk['fds_after']}, zombies {lk['zombies']} | — | — | no growth, no zombie"
            f" | {_v(t['no_leak'])} |"
        )
    return rows


def mcp_rows(r: dict[str, Any]) -> list[str]:
    ours, base, sdk = r["ours"], r["baseline"], r["sdk_noop"]
    rows = [
        f"| MCP `tools/call` over stdio, one client (p50) | {ours['p50_us']:,.0f} µs"
        f" | SDK server spawning the child {base['p50_us']:,.0f} µs (SDK round trip alone"
        f" {sdk['p50_us']:,.0f} µs) | {r['ratio_p50']:.2f}× (median blocks"
        f" {r['ratio_median_block_p50']:.2f}×) | ≤ {bench_mcp.TARGET_RATIO}× | {_v(r['ok'])} |",
    ]
    for level, d in r["levels"].items():
        rows.append(
            f"| … {level} calls in flight | {d['ours']:,.0f} calls/s | {d['baseline']:,.0f}"
            f" calls/s (SDK server) | {d['ratio']:.2f}× | — | info |"
        )
    return rows


def fleet_rows(r: dict[str, Any]) -> list[str]:
    rows = []
    if "overhead" in r:
        o = r["overhead"]
        low, high = o["overhead_spread_ms"]
        rows.append(
            f"| Remote call over NATS: overhead over the same call run locally (median of"
            f" {o['pairs']} paired blocks' p50 differences) | {o['overhead_ms']:.2f} ms"
            f" (quartiles {low:.2f}–{high:.2f}) | local call p50 {o['local_p50_ms']:.2f} ms,"
            f" remote {o['remote_p50_ms']:.2f} ms | — | ≤ {bench_fleet.OVERHEAD_TARGET_MS:.0f} ms"
            f" | {_v(o['overhead_ms'] <= bench_fleet.OVERHEAD_TARGET_MS)} |"
        )
    if "inventory" in r:
        i = r["inventory"]
        for label in ("shared", "distinct"):
            rows.append(
                f"| `GET /v1/skills`, {i['hosts']} hosts × {i['skills_per_host']} skills"
                f" ({label}: {i[f'{label}_skills_offered']:,} offered, p50)"
                f" | {i[f'{label}_get_skills_p50_ms']:.1f} ms | — | — |"
                f" ≤ {bench_fleet.TARGET_MS:.0f} ms | {_v(i[f'{label}_ok'])} |"
            )
    return rows


def replica_rows(r: dict[str, Any]) -> list[str]:
    store = r["store"]
    alone, both = store["followed on A only"], store["followed on A and B"]
    return [
        f"| Events on another replica (PostgreSQL, p50 from the skill's write to the SSE client)"
        f" | {r['there_p50_ms']:,.0f} ms (p95 {r['there_p95_ms']:,.0f} ms)"
        f" | on the replica running the call {r['here_p50_ms']:,.0f} ms | —"
        f" | ≤ {bench_replicas.TARGET_MS:.0f} ms | {_v(r['ok'])} |",
        f"| … the store's rows written per call, followed on the running replica only / also on"
        f" another | {both[1]:.1f} | {alone[1]:.1f} | {both[1] / alone[1]:.2f}×"
        f" | no more rows (≤ 1.05×: lease heartbeats land in either half) | "
        f"{_v(both[1] <= alone[1] * ROWS_TOLERANCE)} |",
    ]


def missed_bars(results: dict[str, Any]) -> list[str]:
    """The SPEC §15 (and CLI start) bars the results miss; info rows are not bars."""
    missed: list[str] = []
    runner = results.get("runner")
    if isinstance(runner, dict):
        for key in ("runner_call_ok", "runner_throughput_ok"):
            if not runner[key]:
                missed.append(f"runner: {key.removesuffix('_ok')}")
    sandbox = results.get("sandbox")
    if isinstance(sandbox, dict) and not sandbox["strict_ok"]:
        missed.append("sandbox: strict call")
    loader = results.get("loader")
    if isinstance(loader, dict):
        missed += [f"loader: {row['skills']} skills" for row in loader["sizes"] if not row["ok"]]
        if not loader.get("memory", {}).get("ok", True):
            missed.append("loader: registry memory")
    leaks = results.get("leaks")
    if isinstance(leaks, dict) and not leaks["ok"]:
        missed.append("leaks")
    rest = results.get("rest")
    if isinstance(rest, dict):
        missed += [
            f"rest: {k.removesuffix('_ok')}" for k, v in rest["targets"].items() if v is False
        ]
    mcp = results.get("mcp")
    if isinstance(mcp, dict) and not mcp["ok"]:
        missed.append("mcp: tools/call p50")
    fleet = results.get("fleet")
    if isinstance(fleet, dict):
        missed += [f"fleet: {bar}" for bar in fleet["missed"]]
    replicas = results.get("replicas")
    if isinstance(replicas, dict):
        if not replicas["ok"]:
            missed.append("replicas: events on another replica")
        store = replicas["store"]
        if store["followed on A and B"][1] > store["followed on A only"][1] * ROWS_TOLERANCE:
            missed.append("replicas: following from another replica writes more rows")
    cli = results.get("cli")
    if isinstance(cli, dict):
        missed += [f"cli: {k}" for k, side in cli["sides"].items() if not side.get("ok", True)]
        for label, found in cli["imports"].items():
            if set(found) & {"fastapi", "sqlalchemy", "alembic", "uvicorn"}:
                missed.append(f"cli: {label} imports the server stack")
    return missed


def table(results: dict[str, Any], when: str, elapsed: float, loads: tuple[float, float]) -> str:
    head = [
        f"Measured {when} on {machine_line()}, {code_version()}; whole run {elapsed:.0f} s;"
        f" 1-min load average {loads[0]:.2f} at start, {loads[1]:.2f} at end"
        f" ({os.cpu_count()} cores: above {os.cpu_count()}, other work was queueing for them).",
        "",
        "| bench | measured | floor (same run) | ratio | target | verdict |",
        "|---|---|---|---|---|---|",
    ]
    rows: list[str] = []
    benches = (
        ("runner", runner_rows),
        ("sandbox", sandbox_rows),
        ("masking", masking_rows),
        ("loader", loader_rows),
        ("leaks", leak_rows),
        ("rest", rest_rows),
        ("mcp", mcp_rows),
        ("fleet", fleet_rows),
        ("replicas", replica_rows),
        ("cli", cli_rows),
    )
    for name, fn in benches:
        res = results.get(name)
        if isinstance(res, str):
            rows.append(f"| {name} | skipped: {res} | | | | |")
        elif res is not None:
            rows += fn(res)
    return "\n".join(head + rows)


def update_readme(text: str) -> None:
    path = BENCH_DIR / "README.md"
    doc = path.read_text(encoding="utf-8")
    start, end = doc.find(START_MARK), doc.find(END_MARK)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: markers {START_MARK} / {END_MARK} not found")
    doc = doc[: start + len(START_MARK)] + "\n" + text + "\n" + doc[end:]
    path.write_text(doc, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small counts (smoke run, not figures)")
    p.add_argument(
        "--only",
        default="runner,sandbox,masking,loader,leaks,rest,mcp,fleet,replicas,cli",
        help="comma-separated benches",
    )
    p.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    p.add_argument("--update-readme", action="store_true", help="rewrite the README figures")
    p.add_argument("--check", action="store_true", help="exit 1 when any bar is missed")
    ns = p.parse_args(argv)
    only = {s.strip() for s in ns.only.split(",")}
    t0 = time.perf_counter()
    load_start = load_average()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    results: dict[str, Any] = {}

    if "runner" in only:
        eprint("== runner: C floor vs SubprocessRunner.run vs execute()")
        opts = bench_runner.Options(block_calls=200, blocks=6, sweep_calls=500, sweep_reps=2)
        if ns.quick:
            opts = bench_runner.Options(
                block_calls=50, blocks=2, sweep_calls=100, sweep_reps=1, warmup=20
            )
        try:
            results["runner"] = bench_runner.run_bench(opts)
            eprint("\n".join(bench_runner.report_lines(results["runner"])))
        except SkipBench as exc:
            results["runner"] = str(exc)
    if "sandbox" in only:
        eprint("== sandbox: each profile's call beside the plain runner's")
        blocks, block_calls = (2, 50) if ns.quick else (6, 200)
        try:
            results["sandbox"] = bench_sandbox.run_bench(blocks, block_calls)
            eprint("\n".join(bench_sandbox.report_lines(results["sandbox"])))
        except SkipBench as exc:
            results["sandbox"] = str(exc)
    if "masking" in only:
        eprint("== masking: a call given a credential, beside the same call without")
        results["masking"] = bench_masking.run_bench(*((10, 2) if ns.quick else (40, 4)))
        eprint("\n".join(bench_masking.report_lines(results["masking"])))
    if "loader" in only:
        eprint("== loader: walk+parse+containment floor vs load_registry")
        sizes = [100, 1000] if ns.quick else [1000, 10_000]
        results["loader"] = bench_loader.run_bench(sizes, 1 if ns.quick else 3)
        # The per-size lines were printed as they came; add the memory line.
        eprint("\n".join(bench_loader.report_lines(results["loader"])[len(sizes) :]))
    if "leaks" in only:
        eprint("== leaks: fds and zombies around many runner calls")
        calls, failing, timeouts = (500, 20, 2) if ns.quick else (10_000, 200, 8)
        try:
            results["leaks"] = bench_leaks.run_bench(calls, 4, failing, timeouts)
            eprint("\n".join(bench_leaks.report_lines(results["leaks"])))
        except SkipBench as exc:
            results["leaks"] = str(exc)
    if "rest" in only:
        eprint("== rest: POST execute on a real server vs a bare FastAPI endpoint, the runner, C")
        try:
            counts = (50, 2, 100, 0, 0) if ns.quick else (250, 4, 600, 2000, 10_000)
            calls, blocks, tput, leak_calls, listing = counts
            results["rest"] = bench_rest.run(calls, tput, leak_calls, listing, blocks)
            eprint("\n".join(bench_rest.report_lines(results["rest"])))
        except SkipBench as exc:
            results["rest"] = str(exc)
    if "mcp" in only:
        eprint("== mcp: tools/call over stdio vs an MCP SDK server spawning the same child")
        mcp_opts = argparse.Namespace(
            blocks=2 if ns.quick else 6,
            block_calls=30 if ns.quick else 150,
            warmup=20 if ns.quick else 100,
            tput_calls=50 if ns.quick else 300,
            levels=(8, 32),
            decompose=False,
        )
        try:
            results["mcp"] = bench_mcp.run_bench(mcp_opts)
            eprint("\n".join(bench_mcp.report_lines(results["mcp"])))
        except SkipBench as exc:
            results["mcp"] = str(exc)
    if "fleet" in only:
        eprint("== fleet: a remote call over NATS beside the same call run locally; inventory")
        try:
            calls, hosts, skills = (40, 10, 5) if ns.quick else (600, 200, 50)
            results["fleet"] = bench_fleet.run_bench(
                calls, hosts=hosts, skills=skills, only={"overhead", "inventory"}
            )
            eprint("\n".join(bench_fleet.report_lines(results["fleet"])))
        except SkipBench as exc:
            results["fleet"] = str(exc)
    if "replicas" in only:
        eprint("== replicas: a call's events on a client of another replica (PostgreSQL)")
        try:
            calls, lines = (1, 5) if ns.quick else (4, 30)
            results["replicas"] = bench_replicas.run_bench(calls, lines)
            eprint("\n".join(bench_replicas.report_lines(results["replicas"])))
        except SkipBench as exc:
            results["replicas"] = str(exc)
    if "cli" in only:
        eprint("== cli: start-up of ongrid-skills against python -c pass")
        try:
            results["cli"] = bench_cli_start.run_bench(5 if ns.quick else 12)
            eprint("\n".join(bench_cli_start.report_lines(results["cli"])))
        except SkipBench as exc:
            results["cli"] = str(exc)

    text = table(results, when, time.perf_counter() - t0, (load_start, load_average()))
    print(text)
    if ns.json:
        Path(ns.json).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    if ns.update_readme:
        if ns.quick:
            raise SystemExit("--update-readme refuses --quick figures")
        update_readme(text)
    missed = missed_bars(results)
    if ns.check:
        for bar in missed:
            eprint(f"missed: {bar}")
        return 1 if missed else 0
    leaks = results.get("leaks")
    return 1 if isinstance(leaks, dict) and not leaks["ok"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
