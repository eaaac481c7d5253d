#!/usr/bin/env python3
"""log_grep - search a text file (typically a log) for a regular expression.

Wire protocol: args JSON object on stdin, one JSON object on stdout, log lines on stderr.

    {"path": "/var/log/nginx/error.log", "pattern": "upstream timed out", "max_matches": 50}
    -> {"path": "/var/log/nginx/error.log", "pattern": "upstream timed out",
        "matches": [{"line": 1042, "text": "2024/05/01 ... upstream timed out ..."}, ...],
        "match_count": 50, "truncated": true, "lines_scanned": 88113,
        "bytes_scanned": 9123456, "file_size": 20480000}

- Python regular expressions (re module), matched anywhere in each line (re.search).
- Stops at max_matches (default 100, at most 1000): "truncated" then says more may follow.
- Only regular files of at most 1 GiB; the scan also stops after 1 GiB if the file grows.
- Lines are decoded as UTF-8 (invalid bytes replaced); a line longer than 1 MiB is searched in
  1 MiB pieces; a returned line is cut to 2000 characters. "cut": true marks a returned text
  that is not the whole line.
- Progress goes to stderr every 100,000 lines as {"progress": bytes, "total": size, ...}.
Exit status: 0 (even with no match), 2 bad args or bad pattern, 1 unreadable file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from typing import Any, NoReturn

SKILL = "log_grep"
MAX_ARGS_BYTES = 1 << 20
MAX_FILE_BYTES = 1 << 30
MAX_LINE_BYTES = 1 << 20
MAX_TEXT_CHARS = 2000
MAX_PATTERN_CHARS = 1000
MAX_MATCHES_LIMIT = 1000
DEFAULT_MAX_MATCHES = 100
PROGRESS_EVERY_LINES = 100_000


def log(message: str) -> None:
    print(f"{SKILL}: {message}", file=sys.stderr, flush=True)


def progress(done: int, total: int, message: str) -> None:
    line = json.dumps({"progress": done, "total": total, "message": message})
    print(line, file=sys.stderr, flush=True)


def fail(message: str, status: int = 1) -> NoReturn:
    log(message)
    sys.exit(status)


def read_args() -> dict[str, Any]:
    raw = sys.stdin.buffer.read(MAX_ARGS_BYTES + 1)
    if len(raw) > MAX_ARGS_BYTES:
        fail("args larger than 1 MiB", 2)
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        fail(f"invalid JSON args: {exc}", 2)
    if not isinstance(args, dict):
        fail("the args must be a JSON object", 2)
    return args


def parse_args(args: dict[str, Any]) -> tuple[str, re.Pattern[str], int]:
    unknown = sorted(set(args) - {"path", "pattern", "max_matches", "ignore_case"})
    if unknown:
        fail(f"unknown argument(s): {', '.join(json.dumps(k) for k in unknown)}", 2)

    path = args.get("path")
    if not isinstance(path, str) or not path:
        fail('"path" is required and must be a non-empty string', 2)
    if "\0" in path:
        fail('"path" must not contain NUL characters', 2)
    if not os.path.isabs(path):
        fail(f"refusing relative path {json.dumps(path)}: the path must be absolute", 2)

    pattern = args.get("pattern")
    if not isinstance(pattern, str):
        fail('"pattern" is required and must be a string', 2)
    if len(pattern) > MAX_PATTERN_CHARS:
        fail(f'"pattern" is longer than {MAX_PATTERN_CHARS} characters', 2)

    ignore_case = args.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        fail('"ignore_case" must be a boolean', 2)
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        fail(f"invalid regular expression {json.dumps(pattern)}: {exc}", 2)

    max_matches = args.get("max_matches", DEFAULT_MAX_MATCHES)
    if isinstance(max_matches, float) and max_matches.is_integer():
        max_matches = int(max_matches)
    if not isinstance(max_matches, int) or isinstance(max_matches, bool):
        fail('"max_matches" must be an integer', 2)
    if not 1 <= max_matches <= MAX_MATCHES_LIMIT:
        fail(f'"max_matches" must be between 1 and {MAX_MATCHES_LIMIT}', 2)
    return path, regex, max_matches


def open_regular_file(path: str) -> tuple[int, int]:
    """Open path for reading; refuse anything but a regular file of at most 1 GiB.

    O_NONBLOCK keeps a FIFO from blocking the open itself; the type is checked on the open
    descriptor (fstat), so the file cannot be swapped between the check and the read.
    """
    shown = json.dumps(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        fail(f"no such file: {shown}")
    except PermissionError:
        fail(f"permission denied: {shown}")
    except OSError as exc:
        fail(f"cannot open {shown}: {exc.strerror}")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        fail(f"refusing {shown}: {kind}")
    if st.st_size > MAX_FILE_BYTES:
        os.close(fd)
        fail(f"refusing {shown}: {st.st_size} bytes, larger than the 1 GiB limit")
    os.set_blocking(fd, True)
    return fd, st.st_size


def main() -> None:
    path, regex, max_matches = parse_args(read_args())
    fd, size = open_regular_file(path)
    log(f"searching {json.dumps(path)} ({size} bytes) for {json.dumps(regex.pattern)}")

    matches: list[dict[str, Any]] = []
    truncated = False
    line_no = 1  # number of the line the next chunk belongs to
    lines_scanned = 0
    bytes_scanned = 0
    at_line_start = True
    with os.fdopen(fd, "rb") as f:
        while True:
            budget = MAX_FILE_BYTES - bytes_scanned
            chunk = f.readline(min(MAX_LINE_BYTES, budget)) if budget else b""
            if not chunk:
                if not budget and f.read(1):
                    log("stopped after 1 GiB: the file grew while it was read")
                    truncated = True
                break
            bytes_scanned += len(chunk)
            starts_line = at_line_start
            at_line_start = chunk.endswith(b"\n")
            if starts_line:
                lines_scanned += 1
            # A piece of a line longer than MAX_LINE_BYTES: matched on its own.
            piece = not starts_line or (not at_line_start and len(chunk) == MAX_LINE_BYTES)
            text = chunk.rstrip(b"\r\n").decode("utf-8", errors="replace")
            already = bool(matches) and matches[-1]["line"] == line_no  # earlier piece matched
            if not already and regex.search(text):
                if len(matches) == max_matches:
                    truncated = True
                    break
                match: dict[str, Any] = {"line": line_no, "text": text[:MAX_TEXT_CHARS]}
                if piece or len(text) > MAX_TEXT_CHARS:
                    match["cut"] = True
                matches.append(match)
            if at_line_start:
                line_no += 1
                if lines_scanned % PROGRESS_EVERY_LINES == 0:
                    progress(
                        bytes_scanned,
                        size,
                        f"{lines_scanned} lines scanned, {len(matches)} matches",
                    )
    log(f"{len(matches)} matches in {lines_scanned} lines" + (" (truncated)" if truncated else ""))
    result = {
        "path": path,
        "pattern": regex.pattern,
        "matches": matches,
        "match_count": len(matches),
        "truncated": truncated,
        "lines_scanned": lines_scanned,
        "bytes_scanned": bytes_scanned,
        "file_size": size,
    }
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
