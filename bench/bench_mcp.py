"""MCP benchmark: ``tools/call`` round trip of a trivial C skill over stdio (SPEC §15).

Two stdio MCP servers, each driven by the official MCP client (``ClientSession`` over
``stdio_client``) from this process, in one run, on the same child binary (``bench/c/child.c``):

- **ours**: ``ongrid-skills mcp`` on a one-skill tree (args validated against a small schema,
  permission gate, execution and audit rows in the SQLite store, live timeline, the runner);
- **baseline**: an MCP SDK server (``MCPServer``) whose tool spawns the same child the usual way
  (``asyncio.create_subprocess_exec``: own session, pipes, empty environment, the skill's folder
  as cwd), writes the same payload and returns the parsed stdout (text + structuredContent, as
  ours does). The same server also has a ``noop`` tool: the SDK's stdio round trip alone, shown
  for reference.

Round trips are timed one by one (``perf_counter_ns`` around ``call_tool``) in ``--blocks``
serial blocks per side, the sides interleaved (order rotated every block) so noise hits them
alike; each side's figure is its best block p50 (the median block p50 is reported too).

Then ``tools/call`` throughput with 8 and 32 calls in flight on each side's session (``--levels``,
``--tput-calls`` per level, best of two rounds, sides rotated), shown with its ratio.

Target (SPEC §15): ours p50 ≤ 1.1× the baseline p50 (one client).

``--decompose`` adds a diagnostic side: ours with the store's write transactions stubbed out
(execution rows, events, audit entries) — not a valid configuration, it only shows what the store
costs per call.

    .venv/bin/python bench/bench_mcp.py [--blocks 8] [--block-calls 200] [--warmup 200] [--json]
    .venv/bin/python bench/bench_mcp.py --decompose          # + ours without the store's writes
    .venv/bin/python bench/bench_mcp.py --serve-baseline CHILD FOLDER   # (the baseline server)
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PAYLOAD, SRC_DIR, SkipBench, build_c, eprint, summarize_us

TARGET_RATIO = 1.1
SKILL_NAME = "c_child"
ARGS = {"a": 1}


# ---- the baseline server (run in its own process) -----------------------------------------------
def serve_baseline(child: str, folder: str) -> None:
    """An MCP SDK stdio server whose tool spawns ``child``; runs until stdin closes."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("baseline", log_level="WARNING")

    @server.tool(name=SKILL_NAME, description="Spawns the trivial C child.")
    async def c_child(a: int = 0) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            child,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=folder,
            env={},
            start_new_session=True,
        )
        out, _err = await proc.communicate(PAYLOAD)
        result: dict[str, Any] = json.loads(out)
        return result

    @server.tool(name="noop", description="Returns at once: the SDK round trip alone.")
    async def noop(a: int = 0) -> dict[str, Any]:
        return {"ok": True}

    asyncio.run(server.run_stdio_async())


def serve_ours_without_store() -> int:
    """Diagnostic only: ``ongrid-skills mcp`` with the store's write transactions (execution
    rows, events, audit entries, and the transactions themselves) replaced by no-ops."""
    from ongrid_skills.doors.cli import main as cli
    from ongrid_skills.store import Store
    from ongrid_skills.store.audit import AuditLog
    from ongrid_skills.store.executions import ExecutionRepo

    def nothing(*_args: Any, **_kwargs: Any) -> None:
        return None

    @contextmanager
    def no_transaction(_store: Any) -> Iterator[None]:
        yield None

    def settled(*_args: Any, **_kwargs: Any) -> concurrent.futures.Future[None]:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)  # the manager waits for its outcome's commit: none here
        return done

    for name in ("insert", "update", "add_events"):
        setattr(ExecutionRepo, name, nothing)
    AuditLog.append = nothing  # type: ignore[assignment,method-assign]
    Store.tx = no_transaction  # type: ignore[assignment,method-assign]
    Store.defer = settled  # type: ignore[assignment,method-assign]
    result = cli.main(["-q", "mcp"])
    return int(result or 0)


# ---- the client side ----------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    tool: str
    block_p50_us: list[float] = field(default_factory=list)
    block_mean_us: list[float] = field(default_factory=list)
    session: Any = None

    @property
    def p50_us(self) -> float:
        return min(self.block_p50_us)

    @property
    def median_p50_us(self) -> float:
        return statistics.median(self.block_p50_us)

    def to_dict(self) -> dict[str, Any]:
        return {
            "p50_us": round(self.p50_us, 1),
            "median_block_p50_us": round(self.median_p50_us, 1),
            "mean_us": round(min(self.block_mean_us), 1),
            "block_p50_us": [round(v, 1) for v in self.block_p50_us],
        }


@contextmanager
def skill_tree(child: Path) -> Iterator[tuple[str, str]]:
    """``<tmp>/skills/c-child/{skill.json,child}`` and ``<tmp>/data``; removed on exit."""
    base = os.path.realpath(tempfile.mkdtemp(prefix="ongrid-bench-mcp-"))
    try:
        folder = os.path.join(base, "skills", "c-child")
        os.makedirs(folder)
        entry = os.path.join(folder, "child")
        shutil.copy2(child, entry)
        os.chmod(entry, 0o755)
        manifest = {
            "name": SKILL_NAME,
            "description": "Trivial C skill of the benchmarks: reads stdin, prints a JSON object.",
            "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "entry": "child",
        }
        with open(os.path.join(folder, "skill.json"), "w", encoding="utf-8") as fh:
            json.dump(manifest, fh)
        yield base, folder
    finally:
        shutil.rmtree(base, ignore_errors=True)


@asynccontextmanager
async def connect(command: str, args: list[str], env: dict[str, str]) -> AsyncIterator[Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=args, env=env)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as session,
    ):
        await session.initialize()
        yield session


async def timed_block(side: Side, calls: int) -> None:
    durations: list[int] = []
    session = side.session
    for _ in range(calls):
        started = time.perf_counter_ns()
        result = await session.call_tool(side.tool, ARGS)
        durations.append(time.perf_counter_ns() - started)
        if result.is_error:
            raise RuntimeError(f"{side.name}: the call failed: {result.content}")
    stats = summarize_us(durations)
    side.block_p50_us.append(stats["p50_us"])
    side.block_mean_us.append(stats["mean_us"])


async def rate(side: Side, calls: int, concurrency: int) -> float:
    """Calls/s of ``calls`` tools/call made by ``concurrency`` tasks on the side's session."""
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            result = await side.session.call_tool(side.tool, ARGS)
            if result.is_error:
                raise RuntimeError(f"{side.name}: the call failed: {result.content}")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - started)


async def _bench(base: str, folder: str, child: Path, opts: argparse.Namespace) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(SRC_DIR),  # the working tree, as every bench
        "ONGRID_SKILLS_EXTERNAL_DIRS": os.path.join(base, "skills"),
        "ONGRID_DATA_DIR": os.path.join(base, "data"),
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    ours = Side("ours (ongrid-skills mcp)", SKILL_NAME)
    baseline = Side("baseline (MCP SDK tool spawning the child)", SKILL_NAME)
    sdk = Side("SDK round trip alone (noop tool)", "noop")
    bare = Side("diagnostic: ours without the store's writes", SKILL_NAME)
    async with AsyncExitStack() as stack:
        ours.session = await stack.enter_async_context(
            connect(sys.executable, ["-m", "ongrid_skills.doors.cli.main", "-q", "mcp"], env)
        )
        baseline.session = await stack.enter_async_context(
            connect(
                sys.executable,
                [str(Path(__file__).resolve()), "--serve-baseline", str(child), folder],
                env,
            )
        )
        sdk.session = baseline.session
        sides = [ours, baseline, sdk]
        if opts.decompose:
            bare.session = await stack.enter_async_context(
                connect(sys.executable, [str(Path(__file__).resolve()), "--serve-bare"], env)
            )
            sides.append(bare)
        for side in sides:
            for _ in range(opts.warmup):
                await side.session.call_tool(side.tool, ARGS)
        for block in range(opts.blocks):
            turn = block % len(sides)
            for side in sides[turn:] + sides[:turn]:
                await timed_block(side, opts.block_calls)
        levels: dict[int, dict[str, float]] = {}
        for level in opts.levels:
            best = {"ours": 0.0, "baseline": 0.0}
            for round_ in range(2):
                pair = [("ours", ours), ("baseline", baseline)]
                for key, side in pair[round_ % 2 :] + pair[: round_ % 2]:
                    best[key] = max(best[key], await rate(side, opts.tput_calls, level))
            levels[level] = {**best, "ratio": round(best["ours"] / best["baseline"], 3)}
            eprint(
                f"  {level} in flight: ours {best['ours']:.0f}/s, baseline {best['baseline']:.0f}/s"
            )
    ratio = ours.p50_us / baseline.p50_us
    extra = {"bare": bare.to_dict()} if opts.decompose else {}
    return {
        **extra,
        "ours": ours.to_dict(),
        "baseline": baseline.to_dict(),
        "sdk_noop": sdk.to_dict(),
        "ratio_p50": round(ratio, 3),
        "ratio_median_block_p50": round(ours.median_p50_us / baseline.median_p50_us, 3),
        "target_ratio": TARGET_RATIO,
        "ok": ratio <= TARGET_RATIO,
        "calls_per_side": opts.blocks * opts.block_calls,
        "levels": levels,
        "load_average": round(os.getloadavg()[0], 2),
    }


def run_bench(opts: argparse.Namespace) -> dict[str, Any]:
    binaries = build_c()
    with skill_tree(binaries.child) as (base, folder):
        return asyncio.run(_bench(base, folder, binaries.child, opts))


def report_lines(res: dict[str, Any]) -> list[str]:
    def line(name: str, d: dict[str, Any]) -> str:
        return (
            f"  {name:<44} p50 {d['p50_us']:>8.0f} µs   median block p50 "
            f"{d['median_block_p50_us']:>8.0f} µs   mean {d['mean_us']:>8.0f} µs"
        )

    verdict = "OK" if res["ok"] else "MISSED"
    bare = (
        [line("diagnostic: ours without the store's writes", res["bare"])] if "bare" in res else []
    )
    return [
        f"MCP tools/call over stdio, {res['calls_per_side']} calls per side "
        f"(load average {res['load_average']})",
        line("ours (ongrid-skills mcp)", res["ours"]),
        line("baseline (MCP SDK tool spawning the child)", res["baseline"]),
        line("SDK round trip alone (noop tool)", res["sdk_noop"]),
        *bare,
        f"  ratio ours/baseline p50: {res['ratio_p50']:.3f} (median blocks: "
        f"{res['ratio_median_block_p50']:.3f}); target ≤ {TARGET_RATIO} → {verdict}",
        *(
            f"  {level} in flight: ours {d['ours']:.0f} calls/s, baseline {d['baseline']:.0f}"
            f" calls/s ({d['ratio']:.2f}×)"
            for level, d in res["levels"].items()
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--block-calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--tput-calls", type=int, default=400, help="calls per throughput level")
    parser.add_argument(
        "--levels",
        type=lambda v: tuple(int(x) for x in v.split(",") if x.strip()),
        default=(8, 32),
        help="comma-separated calls in flight for the throughput rounds",
    )
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument(
        "--decompose", action="store_true", help="add ours without the store's writes"
    )
    parser.add_argument("--serve-baseline", nargs=2, metavar=("CHILD", "FOLDER"))
    parser.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.serve_bare:
        return serve_ours_without_store()
    if ns.serve_baseline:
        serve_baseline(*ns.serve_baseline)
        return 0
    try:
        res = run_bench(ns)
    except SkipBench as exc:
        print(f"SKIPPED mcp bench: {exc}")
        return 0
    if ns.json:
        print(json.dumps(res, indent=2))
    else:
        eprint("")
        print("\n".join(report_lines(res)))
    return 1 if ns.strict and not res["ok"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
