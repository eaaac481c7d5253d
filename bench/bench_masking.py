"""Masking benchmark: what replacing a call's secrets in its output costs (SPEC §18).

Measured in one run, on the same bytes and the same child:

- **scan**: ``Masker.mask`` over 1 MiB of stderr-like text holding the secret in its forms, against
  the floor of one ``bytes.find`` of a single needle over the same bytes (the least any search
  for a secret must do), in MB/s;
- **call**: a real ``SubprocessRunner`` call of a Python child that prints its token on stdout
  and a few stderr lines, with the call's masker and without one, interleaved, p50 per call;
  the difference is what masking adds to a call.

    .venv/bin/python bench/bench_masking.py [--calls 60] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import eprint
from ongrid_skills.execution.masking import Masker
from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner

SECRET = "ghp_bench-secret-0123456789abcdef"
CHILD = f"""#!{os.path.realpath(sys.executable)} -S
import os, sys
t = os.environ["TOKEN"]
for n in range(5):
    sys.stderr.write("line %d using %s\\n" % (n, t))
sys.stdout.write('{{"token": "%s", "ok": true}}' % t)
"""


def text_mib() -> bytes:
    """1 MiB of log-like lines, one in fifty holding the secret in one of its forms."""
    forms = [SECRET, base64.b64encode(SECRET.encode()).decode(), SECRET.replace("-", "%2D")]
    lines = []
    n = 0
    while sum(len(line) for line in lines) < 1024 * 1024:
        extra = f" token={forms[n % 3]}" if n % 50 == 0 else ""
        lines.append(f"2026-12-05T14:00:00Z worker[{n}] step {n} took {n % 97} ms{extra}\n")
        n += 1
    return "".join(lines).encode()


def scan(rounds: int) -> dict[str, float]:
    data = text_mib()
    masker = Masker([SECRET])
    size_mb = len(data) / 1e6

    def best(fn: object) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - started)
        return size_mb / min(times)

    floor = best(lambda: data.find(b"\0never-there\0"))
    ours = best(lambda: masker.mask(data))
    return {"floor_mb_s": round(floor, 1), "mask_mb_s": round(ours, 1)}


def calls(count: int, rounds: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="ongrid-bench-mask-"))
    entry = folder / "run"
    entry.write_text(CHILD)
    entry.chmod(0o755)
    root = os.path.realpath(folder)
    plain = SpawnSpec(
        entry=str(Path(root) / "run"),
        root=root,
        cwd=root,
        env={"TOKEN": SECRET},
        timeout_seconds=10,
        shown_root=root,
    )
    masked = dataclasses.replace(plain, masker=Masker([SECRET]))
    runner = SubprocessRunner()

    async def block(spec: SpawnSpec) -> list[float]:
        out = []
        for _ in range(count):
            started = time.perf_counter_ns()
            outcome = await runner.run(spec, b"{}")
            out.append((time.perf_counter_ns() - started) / 1000)
            assert outcome.result is not None
        return out

    async def main() -> dict[str, list[float]]:
        seen: dict[str, list[float]] = {"plain": [], "masked": []}
        for n in range(rounds):
            order = ("plain", "masked") if n % 2 == 0 else ("masked", "plain")
            for side in order:
                durations = await block(plain if side == "plain" else masked)
                seen[side].append(statistics.median(durations))
        return seen

    seen = asyncio.run(main())
    runner.close()
    plain_us, masked_us = min(seen["plain"]), min(seen["masked"])
    return {
        "plain_p50_us": round(plain_us, 1),
        "masked_p50_us": round(masked_us, 1),
        "added_us": round(masked_us - plain_us, 1),
    }


def run_bench(count: int = 60, rounds: int = 5) -> dict[str, dict[str, float]]:
    """Every figure: the scan against its floor, the call with and without a masker."""
    return {"scan": scan(rounds), "call": calls(count, rounds)}


def report_lines(figures: dict[str, dict[str, float]]) -> list[str]:
    s, c = figures["scan"], figures["call"]
    return [
        f"masking 1 MiB: {s['mask_mb_s']} MB/s (floor, one bytes.find: {s['floor_mb_s']} MB/s)",
        f"call p50: {c['masked_p50_us']} us masked, {c['plain_p50_us']} us not "
        f"(+{c['added_us']} us)",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run_bench(args.calls, args.rounds)
    if args.json:
        print(json.dumps(figures))
        return 0
    eprint("\n".join(report_lines(figures)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
