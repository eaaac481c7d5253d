"""Short ids: what the operator types (``d0e3b6ee``) → the one id it stands for, or a refusal.

Ids are 32 hex digits. A whole id is used as it is; :data:`MIN_PREFIX` to 31 hex digits are a
prefix, resolved by the server (``?id_prefix=`` on the listing, answered from the store's index:
nothing is downloaded but the candidates). One match resolves; several are refused with the
candidates listed; none is "not found". Both exit 2. Anything else (not hex, too short) goes to
the server as it is, which answers 404 for an id it does not know.
"""

from __future__ import annotations

import re
from typing import Any

from ongrid_skills.doors.cli.remote import Remote, fail

#: The fewest hex digits accepted as a prefix (as git's short hashes: fewer would match many).
MIN_PREFIX = 4
#: Candidates shown when a prefix is ambiguous.
SHOWN = 10
_WHOLE = re.compile(r"[0-9a-f]{32}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_LISTINGS = {"approval": "/v1/approvals", "execution": "/v1/executions"}


def resolve(remote: Remote, kind: str, given: str) -> str:
    """The whole id of the ``kind`` (``approval`` or ``execution``) that ``given`` names."""
    if _WHOLE.fullmatch(given) or not _HEX.fullmatch(given) or len(given) > 32:
        return given
    if len(given) < MIN_PREFIX:
        hint = f"give {MIN_PREFIX} or more hex digits"
        fail(f"not_found: {given!r} is too short to name an {kind} ({hint})")
    body = remote.call("GET", _LISTINGS[kind], params={"id_prefix": given, "limit": SHOWN + 1})
    items: list[dict[str, Any]] = body["items"]
    if len(items) == 1:
        return str(items[0]["id"])
    if not items:
        fail(f"not_found: no {kind} id starts with {given!r}")
    lines = [f"  {_candidate(kind, item)}" for item in items[:SHOWN]]
    if len(items) > SHOWN:
        lines.append("  …and more")
    listing = "\n".join(lines)
    fail(f"{given!r} is ambiguous: it starts the ids of\n{listing}\ngive more digits")


def _candidate(kind: str, item: dict[str, Any]) -> str:
    if kind == "approval":
        return f"{item['id']}  {item['status']:<9} {item['skill']}  by {item['requested_by']}"
    return f"{item['id']}  {item['status']:<16} {item['skill']}  {item['created_at']}"
