"""What the packs page shows, as plain data: the installed packs beside what the indexes offer
(one reading of the indexes for both), a change's outcome as a sentence, and a refused change
as its stable code, a summary and one line per problem.

Everything here is read from :class:`~ongrid_skills.packs.service.Packs` (its views are the
REST answers' dicts); this module must never change a pack nor decide who may look.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ongrid_skills.doors.statuses import STATUS_BY_CODE
from ongrid_skills.errors import PackError, SkillCollision, SkillError
from ongrid_skills.packs.install import Outcome
from ongrid_skills.packs.service import Packs

#: Hex digits of a digest shown in a table (the whole digest is in its title and copy box).
DIGEST_SHOWN = 12
#: Results of an index search listed at most (the REST route has them all).
OFFERED_SHOWN = 100


def short_digest(digest: str | None) -> str:
    """``sha256:c66f631ddbed…`` of a digest (``—`` for none).

    >>> short_digest("sha256:" + "ab" * 32)
    'sha256:abababababab…'
    """
    if not digest:
        return "—"
    algorithm, _, hexdigits = digest.partition(":")
    return f"{algorithm}:{hexdigits[:DIGEST_SHOWN]}…" if hexdigits else digest


def shown_time(value: str | None) -> str:
    """An RFC 3339 time of the pack views as the other tables show times.

    >>> shown_time("2026-12-03T14:15:09.037314Z")
    '2026-12-03 14:15:09 UTC'
    """
    if not value:
        return "—"
    return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True, slots=True)
class Market:
    """The page's data: the installed packs (each with ``newest``, the newer version an index
    offers, or None), the indexes' packs matching the query, and the indexes' problems."""

    installed: list[dict[str, Any]]
    offered: list[dict[str, Any]]
    problems: list[str]
    indexes: int
    query: str
    more: int = 0


def read_market(packs: Packs, query: str) -> Market:
    """The installed packs and the indexes' offer (blocking: the indexes may be fetched)."""
    installed = sorted(packs.installed(), key=lambda item: item["id"])
    if not packs.indexes:
        for item in installed:
            item["newest"] = None
        return Market(installed, [], [], 0, query)
    catalog = packs.catalog()
    offered = packs.available(query, catalog)["items"]
    newer = {item["id"]: item["newest"] for item in packs.outdated(catalog)["items"]}
    for item in installed:
        item["newest"] = newer.get(item["id"])
    shown = offered[:OFFERED_SHOWN]
    return Market(
        installed,
        shown,
        list(catalog.problems),
        len(packs.indexes),
        query,
        len(offered) - len(shown),
    )


@dataclass(frozen=True, slots=True)
class Done:
    """A change that went through: what it did, in a sentence, and what it brought."""

    sentence: str
    pack_id: str
    skills: tuple[str, ...] = ()
    personas: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    signer: str | None = None
    trust: str | None = None
    #: The Roll back offered at once: ``("rollback", previous version)`` after an upgrade or a
    #: downgrade, ``("remove", "")`` after a first install; None after anything else.
    undo: tuple[str, str] | None = None
    version: str = ""


def done(outcome: Outcome) -> Done:
    """The notice of a change."""
    pack, version, before = outcome.pack_id, outcome.version, outcome.from_version
    sentences = {
        "install": f"Installed {pack} {version}.",
        "upgrade": f"Upgraded {pack} from {before} to {version}.",
        "downgrade": f"Changed {pack} from {before} to the older {version}.",
        "rollback": f"Rolled {pack} back from {before} to {version}.",
        "remove": f"Removed {pack} {before}: its skills and personas left the catalogue.",
        "unchanged": f"{pack} {version} was already the active version: nothing changed.",
    }
    if outcome.removed is False:  # a removal of a pack that is not active: idempotent
        sentences["unchanged"] = f"{pack} is not installed: nothing to remove."
    record = outcome.record if outcome.action != "remove" else None
    undo = None
    if outcome.action in ("install", "upgrade", "downgrade"):
        undo = ("rollback", before) if before else ("remove", "")
    return Done(
        sentences.get(outcome.action, f"{outcome.action} {pack} {version}."),
        pack,
        record.skills if record else (),
        record.personas if record else (),
        tuple(outcome.warnings),
        record.signer if record else None,
        record.trust if record else None,
        undo,
        version or "",
    )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A change refused: its error code (as REST and the CLI name it), the HTTP status of
    that code, a summary, and each problem on a line of its own."""

    code: str
    status: int
    summary: str
    lines: list[str] = field(default_factory=list)


def refusal(exc: SkillError) -> Refusal:
    """The page's account of a typed error: a collision lists each name, an invalid or unsafe
    pack each problem (``path:line:col: severity: message``)."""
    status = STATUS_BY_CODE.get(exc.code, 400)
    if isinstance(exc, SkillCollision):
        lines = [
            f"{kind} {name!r}: already loaded ({origin})" for kind, name, origin in exc.collisions
        ]
        return Refusal(exc.code, status, f"pack {exc.label} collides with what is loaded", lines)
    if isinstance(exc, PackError) and exc.problems:
        return Refusal(exc.code, status, exc.summary, [p.format() for p in exc.problems])
    return Refusal(exc.code, status, exc.message)
