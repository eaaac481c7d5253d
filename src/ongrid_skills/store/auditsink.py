"""The optional external audit sink: one JSON line per audit entry, ``{"seq", "hash", "key"}``.

``ONGRID_AUDIT_SINK`` selects it (off by default): a file path (opened ``O_APPEND``, lines are
meant to be shipped elsewhere by a log shipper), ``syslog`` (the local daemon at ``/dev/log``,
facility ``authpriv``) or ``syslog:/path/to/socket``. The lines are witnesses kept out of the
database's reach: ``ongrid-skills audit verify --against FILE`` checks the chain against them.
A sink never receives entry contents, only their sequence number and keyed hash; it must never
raise into a committing transaction (the anchor writer calls it from its own thread).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from ongrid_skills.errors import ConfigError

_LOG_AUTHPRIV, _LOG_NOTICE = 10, 5  # <PRI> = facility * 8 + severity (RFC 3164)
SYSLOG_IDENT = "ongrid-skills"


@dataclass(frozen=True, slots=True)
class Witness:
    """An external record that entry ``seq`` had hash ``hash`` (a sink line or the anchor)."""

    seq: int
    hash: str
    source: str  # the file it was read from
    line: int = 0


class Sink(Protocol):
    def write(self, lines: list[str]) -> None: ...
    def close(self) -> None: ...


class FileSink:
    """Appends lines to a file; each batch is one ``write`` (so batches never interleave)."""

    def __init__(self, path: str) -> None:
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ConfigError(f"audit sink {path}: {exc.strerror}") from None

    def write(self, lines: list[str]) -> None:
        os.write(self._fd, "".join(line + "\n" for line in lines).encode())

    def close(self) -> None:
        os.close(self._fd)


class SyslogSink:
    """One datagram per line to a local syslog socket (reconnects once if the daemon restarted)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._sock = self._connect()

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.connect(self.address)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"audit sink syslog at {self.address}: {exc.strerror}") from None
        return sock

    def write(self, lines: list[str]) -> None:
        head = f"<{_LOG_AUTHPRIV * 8 + _LOG_NOTICE}>{SYSLOG_IDENT}[{os.getpid()}]: "
        for line in lines:
            message = (head + line).encode()
            try:
                self._sock.send(message)
            except OSError:
                self._sock.close()
                self._sock = self._connect()
                self._sock.send(message)

    def close(self) -> None:
        self._sock.close()


def open_sink(spec: str | None) -> Sink | None:
    """``None``/empty: no sink; ``syslog`` or ``syslog:SOCKET``; anything else is a file path."""
    if not spec:
        return None
    if spec == "syslog":
        return SyslogSink("/dev/log")
    if spec.startswith("syslog:"):
        return SyslogSink(spec.removeprefix("syslog:"))
    return FileSink(spec)


def sink_line(seq: int, digest: str, key_id: str) -> str:
    return json.dumps({"seq": seq, "hash": digest, "key": key_id}, separators=(",", ":"))


def read_witnesses(path: str, key_id: str) -> Iterator[Witness]:
    """The ``{"seq", "hash", "key"}`` objects of a sink file or a syslog extract, for ``key_id``.

    Anything before the first ``{`` of a line (a syslog prefix) is skipped, as are lines of
    another key (another store logging to the same place) and lines that are not ours.
    """
    with open(path, encoding="utf-8", errors="replace") as fh:
        yield from _parse(fh, path, key_id)


def _parse(lines: Iterable[str], path: str, key_id: str) -> Iterator[Witness]:
    for number, line in enumerate(lines, 1):
        start = line.find("{")
        if start < 0:
            continue
        try:
            item = json.loads(line[start:])
        except ValueError:
            continue
        if not isinstance(item, dict) or item.get("key") != key_id:
            continue
        seq, digest = item.get("seq"), item.get("hash")
        if isinstance(seq, int) and isinstance(digest, str):
            yield Witness(seq, digest, path, number)
