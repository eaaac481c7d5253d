"""Who is calling: a principal holds a role and is a human or an agent; what a token may be named.
Identity only: what a principal may do is decided in :mod:`ongrid_skills.governance.gate`.

A token's name is the identity of whoever holds it: it signs approvals and stands in the audit
log. So one person must not get two names that read alike, and no token may pass for the product
itself. :func:`token_name` is the one rule:

>>> token_name("  Ａｄａ ")
'ada'
>>> token_name("Straße")
'strasse'
"""

from __future__ import annotations

import getpass
import json
import os
import re
import unicodedata
from dataclasses import dataclass

from ongrid_skills.errors import InvalidRequest
from ongrid_skills.types import Role

#: A token name after normalisation: 1 to 64 of a-z 0-9 . _ @ -, starting with a letter or digit.
TOKEN_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._@-]{0,63}")
#: Names the product writes as the actor of audit entries itself ("manager", "watch"), the bare
#: words of its prefixed actors ("cli:<user>", "mcp:<user>", "agent:<id>", "signal:SIGHUP"; a
#: colon is outside the character set anyway), and names that read as the system.
RESERVED_TOKEN_NAMES = frozenset(
    {
        "agent",
        "anonymous",
        "cli",
        "local",
        "manager",
        "mcp",
        "ongrid",
        "ongrid-skills",
        "root",
        "signal",
        "system",
        "unknown",
        "watch",
    }
)


@dataclass(frozen=True, slots=True)
class Principal:
    """``name`` identifies the principal in approvals and the audit log (token names are unique)."""

    name: str
    role: Role
    human: bool = True

    @property
    def can_sign(self) -> bool:
        """Whether it may sign approvals at all: a human operator or admin, never an agent."""
        return self.human and self.role in (Role.OPERATOR, Role.ADMIN)


def local_user() -> str:
    """The login name of whoever runs this process (the uid when it has no name)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def token_name(raw: str) -> str:
    """The stored form of a token name: NFKC, case-folded, trimmed; InvalidRequest if unsafe.

    Folding happens first, so ``Ada``, ``ADA`` and fullwidth ``ＡＤＡ`` are one name (``ada``);
    what is left must match :data:`TOKEN_NAME_RE` (zero-width and other invisible characters,
    look-alike letters from other scripts and white space inside are refused, not stripped) and
    must not be one of :data:`RESERVED_TOKEN_NAMES`.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", raw).casefold()).strip()
    shown = json.dumps(raw)  # escapes what cannot be seen: "ada\u200b"
    if not TOKEN_NAME_RE.fullmatch(folded):
        raise InvalidRequest(
            f"token name {shown} is not allowed: after NFKC and case folding a name is 1 to 64 "
            "characters of a-z 0-9 . _ @ -, starting with a letter or digit"
        )
    if folded in RESERVED_TOKEN_NAMES:
        raise InvalidRequest(
            f"token name {shown} is reserved: the product writes it into the audit log itself"
        )
    return folded


def identity_key(name: str) -> str:
    """What two stored names are compared by, for names stored before :func:`token_name` too:
    NFKC, case-folded, invisible format characters (zero-width and the like) dropped."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return "".join(c for c in folded if unicodedata.category(c) != "Cf").strip()
