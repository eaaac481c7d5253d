"""Web console benchmark (SPEC §14, §15): the catalogue page with 10,000 skills, rendered by a real
``ongrid-skills serve`` on loopback.

A data dir gets an operator token (so the first start creates none), a tree of N generated
external skills (10 categories, three classes) and a persona. The server starts on it; the bench
logs in through the login form like a browser, then times pages over one keep-alive connection
(the session cookie, no redirect followed):

- the floor: ``GET /login`` on the same server (the base template and the headers, no catalogue);
- ``GET /skills`` (page 1: 50 skills grouped by category), a page in the middle, the last page,
  a search (``q=disk check``, BM25 over the 10,000), a class filter, and a persona filter
  (``gate.offered`` over every skill).

Each page is fetched in rounds, one request of each kind per round in a rotated order, so noise
from elsewhere hits every kind alike; the p50 of each kind counts. The first search of a
registry snapshot builds its BM25 index: that one request is timed on its own, before the rounds.
Target: every catalogue page p50 ≤ 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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

from _common import SRC_DIR, code_version, eprint, load_average, machine_line

sys.path.insert(0, str(SRC_DIR))

CLI = Path(sys.executable).with_name("ongrid-skills")
TARGET_MS = 150.0
WORDS = ("disk", "port", "dns", "cache", "queue", "log", "cert", "memory", "cpu", "swap")
CLASSES = ("safe", "safe", "mutating", "dangerous")


def write_tree(root: Path, count: int) -> None:
    """N skills, 100 per folder; every one shares its entry script's bytes."""
    for i in range(count):
        folder = root / f"g{i // 100:04d}" / f"s{i:05d}"
        folder.mkdir(parents=True)
        entry = folder / "run.sh"
        entry.write_text("#!/bin/sh\ncat\n")
        entry.chmod(0o755)
        word = WORDS[i % len(WORDS)]
        manifest = {
            "name": f"check_{word}_{i:05d}",
            "description": f"Check the {word} of service {i} and report what is wrong.",
            "schema": {"type": "object", "properties": {"host": {"type": "string"}}},
            "entry": "run.sh",
            "class": CLASSES[i % len(CLASSES)],
            "category": f"cat{i % 10}",
        }
        (folder / "skill.json").write_text(json.dumps(manifest))


def write_persona(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "disk_doctor.md").write_text(
        "---\nname: disk_doctor\ndescription: Disk problems.\nwhen_to_use: Disks fill up.\n"
        "permission_mode: mutating-with-confirm\ntools: ['check_disk_*', 'check_swap_*']\n"
        "---\nYou look after disks.\n"
    )


def operator_token(data: Path) -> str:
    from ongrid_skills.store import open_store
    from ongrid_skills.types import Role

    store = open_store(str(data))
    try:
        return store.tokens.create("bench", Role.OPERATOR)[0]
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Connection:
    """One keep-alive HTTP/1.1 connection; ``get`` returns (status, headers, body)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = bytearray()

    def send(
        self, method: str, path: str, cookie: str = "", form: str = ""
    ) -> tuple[int, str, bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if cookie:
            head += f"Cookie: {cookie}\r\n"
        if method == "POST":
            head += "Content-Type: application/x-www-form-urlencoded\r\n"
        head += f"Content-Length: {len(form)}\r\n\r\n"
        self.sock.sendall(head.encode() + form.encode())
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        raw_head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        text = raw_head.decode("latin-1")
        match = re.search(r"(?im)^content-length:\s*(\d+)", text)
        length = int(match.group(1)) if match else 0
        while len(rest) < length:
            rest += self._recv()
        self.buf[:] = rest[length:]
        return int(text.split(" ", 2)[1]), text, rest[:length]

    def _recv(self) -> bytes:
        chunk = self.sock.recv(262144)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        self.sock.close()


def cookie_value(head: str, name: str) -> str:
    match = re.search(rf"(?im)^set-cookie:\s*{name}=([^;]*)", head)
    if match is None:
        raise RuntimeError(f"no {name} cookie in:\n{head}")
    return match.group(1)


@contextmanager
def served(skills: Path, personas: Path, data: Path) -> Iterator[int]:
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_PERSONAS_DIRS": str(personas),
        "ONGRID_DATA_DIR": str(data),
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    proc = subprocess.Popen(
        [str(CLI), "-q", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = Connection(port)
                status, _, _ = conn.send("GET", "/v1/health")
                conn.close()
                if status == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve did not start")
            time.sleep(0.05)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def log_in(port: int, token: str) -> str:
    """The session cookie a browser would get from the login form."""
    conn = Connection(port)
    try:
        status, head, body = conn.send("GET", "/login")
        nonce = cookie_value(head, "ongrid_login")
        field = re.search(rb'name="csrf" value="([^"]+)"', body)
        assert status == 200 and field is not None
        form = f"csrf={field.group(1).decode()}&token={token}&next=/skills"
        status, head, _ = conn.send("POST", "/login", f"ongrid_login={nonce}", form)
        assert status == 303, status
        return "ongrid_session=" + cookie_value(head, "ongrid_session")
    finally:
        conn.close()


def run(count: int, rounds: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="ongrid-bench-web-"))
    try:
        write_tree(base / "skills", count)
        write_persona(base / "personas")
        token = operator_token(base / "data")
        pages = count // 50 + (1 if count % 50 else 0)
        kinds = {
            "floor: /login": "/login",
            "catalogue page 1": "/skills",
            "page in the middle": f"/skills?page={max(pages // 2, 1)}",
            "last page": f"/skills?page={pages}",
            "search 'disk check'": "/skills?q=disk+check",
            "class=dangerous": "/skills?class=dangerous",
            "persona=disk_doctor": "/skills?persona=disk_doctor",
        }
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        with served(base / "skills", base / "personas", base / "data") as port:
            cookie = log_in(port, token)
            conn = Connection(port)
            started = time.perf_counter()
            status, _, body = conn.send("GET", "/skills?q=cold+index", cookie)
            first_search_ms = (time.perf_counter() - started) * 1000
            assert status == 200, status
            status, _, body = conn.send("GET", "/skills", cookie)
            assert status == 200 and f"of {count}" in body.decode(), "not every skill is listed"
            order = list(kinds.items())
            for round_ in range(rounds + 3):
                shift = round_ % len(order)
                for kind, path in order[shift:] + order[:shift]:
                    started = time.perf_counter()
                    status, _, body = conn.send("GET", path, cookie if kind[0] != "f" else "")
                    elapsed = (time.perf_counter() - started) * 1000
                    assert status == 200, (kind, status)
                    if round_ >= 3:  # three rounds of warm-up
                        times[kind].append(elapsed)
            conn.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    p50 = {kind: statistics.median(values) for kind, values in times.items()}
    floor = p50["floor: /login"]
    catalogue = {k: v for k, v in p50.items() if k != "floor: /login"}
    return {
        "skills": count,
        "rounds": rounds,
        "p50_ms": p50,
        "floor_ms": floor,
        "first_search_ms": first_search_ms,
        "worst_catalogue_ms": max(catalogue.values()),
        "ok": max(catalogue.values()) <= TARGET_MS,
        "machine": machine_line(),
        "code": code_version(),
        "load": load_average(),
    }


def report_lines(res: dict[str, Any]) -> list[str]:
    lines = [
        f"web catalogue, {res['skills']} skills, {res['rounds']} rounds "
        f"({res['machine']}; {res['code']}; load {res['load']:.2f})",
        "| page | p50 | × floor |",
        "|---|---:|---:|",
    ]
    for kind, value in res["p50_ms"].items():
        lines.append(f"| {kind} | {value:.1f} ms | {value / res['floor_ms']:.1f}× |")
    lines.append(f"first search (builds the BM25 index): {res['first_search_ms']:.0f} ms")
    verdict = "OK" if res["ok"] else "MISSED"
    lines.append(
        f"worst catalogue p50 {res['worst_catalogue_ms']:.1f} ms (target ≤ {TARGET_MS:.0f} ms):"
        f" {verdict}"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    eprint(f"writing {args.skills} skills and starting serve…")
    res = run(args.skills, args.rounds)
    print(json.dumps(res, indent=2) if args.json else "\n".join(report_lines(res)))
    return 1 if args.strict and not res["ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
