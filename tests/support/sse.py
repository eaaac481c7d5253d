"""Server-Sent Events read the way a browser reads them: ``event:``, ``id:`` and ``data:``
fields, data lines joined with newlines, comments (``: ping``) kept apart, one event per blank
line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Sse:
    """One event of a stream (``comment`` set, and the rest empty, for a comment line)."""

    event: str
    data: str
    id: str | None = None
    comment: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def read_sse(response: httpx.Response, *, comments: bool = False) -> Iterator[Sse]:
    """The events of ``response`` as they arrive; comment lines too with ``comments``."""
    event, data, ident = "message", [], None
    for line in response.iter_lines():
        if line.startswith(":"):
            if comments:
                yield Sse("", "", comment=line[1:].strip())
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("id:"):
            ident = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and (data or event != "message"):
            yield Sse(event, "\n".join(data), ident)
            event, data, ident = "message", [], None
