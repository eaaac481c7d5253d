"""Native skills benchmarks (SPEC §15): loading 1,000 SKILL.md files, and search_skills.

- Loader: a tree of N SKILL.md folders (each one tool, ``impl: exec:run.sh``, a small schema),
  loaded by ``ongrid_skills.load_registry(native_dirs=[root])`` vs the bare floor measured in the
  same run on the same tree: a sorted depth-first ``os.scandir`` walk + read + frontmatter split
  + ``yaml.safe_load`` (the C loader when PyYAML has it, as ours uses). Best of 3, warm cache.
  Target ≤ 2×.
- search_skills: a registry of 10,000 skills; the p50 of ``search_skills`` queries executed
  through ``ongrid_skills.execute`` (gate, args check, BM25 over the shared index, Execution
  record), after the index was built once. Target ≤ 20 ms per query.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import SRC_DIR, eprint

sys.path.insert(0, str(SRC_DIR))

import yaml

SKILL_MD = """---
name: skill_{i:05d}
description: Generated native skill number {i} that checks {topic} on a host.
when_to_use: When the user asks about {topic} of service {i}.
metadata:
  os: [linux, darwin]
tools:
  - name: tool_{i:05d}
    impl: exec:run.sh
    class: read
    description: Check {topic} for service {i}.
    schema:
      type: object
      properties:
        host: {{type: string}}
        port: {{type: integer, minimum: 1, maximum: 65535}}
      required: [host]
---
# skill_{i:05d}

Instructions for the model about {topic}.
"""
TOPICS = ("latency", "disk pressure", "memory", "certificates", "dns", "queues", "replication")


def write_tree(root: Path, count: int) -> None:
    for i in range(count):
        folder = root / f"g{i // 100:03d}" / f"s{i:05d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(SKILL_MD.format(i=i, topic=TOPICS[i % len(TOPICS)]))
        entry = folder / "run.sh"
        entry.write_text("#!/bin/sh\ncat\n")
        entry.chmod(0o755)


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def bare_floor(root: str) -> int:
    """Walk + read + split + YAML parse of every SKILL.md, nothing else."""
    count = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in reversed(entries):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.name == "SKILL.md":
                with open(entry.path, encoding="utf-8") as fh:
                    text = fh.read()
                _, front, _ = text.split("---\n", 2)
                yaml.load(front, Loader=_LOADER)
                count += 1
    return count


def load_ours(root: str) -> Any:
    import ongrid_skills

    return ongrid_skills.load_registry(
        external_dirs=[], persona_dirs=[], native_dirs=[root], bundled=False, log=lambda _l: None
    )


def best_of(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def search_bench(count: int, queries: int) -> dict[str, float]:
    import ongrid_skills
    from ongrid_skills.skills.model import Skill
    from ongrid_skills.skills.registry import Registry, internal_skills

    skills = {s.name: s for s in internal_skills()}
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        skills[f"tool_{i:05d}"] = Skill(
            name=f"tool_{i:05d}",
            description=f"Check {topic} for service {i} and report the figures.",
            when_to_use=f"When the user asks about {topic} of service {i}.",
        )
    registry = Registry(skills)
    words = ["latency service 42", "disk pressure", "certificates expiry", "dns 9000", "queues"]

    async def go() -> list[float]:
        await ongrid_skills.execute(registry, "search_skills", {"query": "warm up"})
        out = []
        for n in range(queries):
            started = time.perf_counter()
            execution = await ongrid_skills.execute(
                registry, "search_skills", {"query": words[n % len(words)]}
            )
            out.append((time.perf_counter() - started) * 1000)
            assert execution.ok, execution.error
        return out

    times = asyncio.run(go())
    return {
        "skills": count,
        "queries": queries,
        "p50_ms": statistics.median(times),
        "max_ms": max(times),
    }


def run(count: int, repeat: int, search_count: int, queries: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ongrid-bench-native-") as tmp:
        root = str(Path(os.path.realpath(tmp)) / "skills")
        write_tree(Path(root), count)
        bare_floor(root)  # warm the page cache
        floor = best_of(lambda: bare_floor(root), repeat)
        ours = best_of(lambda: load_ours(root), repeat)
        loaded = len(load_ours(root))
        assert loaded == count, f"loaded {loaded} of {count}"
        out["loader"] = {
            "skills": count,
            "floor_ms": floor * 1000,
            "ours_ms": ours * 1000,
            "ratio": ours / floor,
            "ok": ours / floor <= 2.0,
        }
        eprint(f"SKILL.md loader: {out['loader']}")
    out["search"] = search_bench(search_count, queries)
    out["search"]["ok"] = out["search"]["p50_ms"] <= 20
    eprint(f"search_skills: {out['search']}")
    return out


def report_lines(res: dict[str, Any]) -> list[str]:
    loader, search = res["loader"], res["search"]
    return [
        "| native measure | figure | floor (same run) | ratio / target | met |",
        "|---|---|---|---|---|",
        f"| load {loader['skills']} SKILL.md (best of 3) | {loader['ours_ms']:.0f} ms | "
        f"{loader['floor_ms']:.0f} ms (walk + YAML) | {loader['ratio']:.2f}× / ≤ 2× | "
        f"{'yes' if loader['ok'] else 'NO'} |",
        f"| `search_skills` over {search['skills']} skills, p50 of {search['queries']} | "
        f"{search['p50_ms']:.2f} ms | — | ≤ 20 ms | {'yes' if search['ok'] else 'NO'} |",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--search-skills", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    res = run(args.skills, args.repeat, args.search_skills, args.queries)
    print(json.dumps(res, indent=2) if args.json else "\n".join(report_lines(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
