"""The digest of a call's args: SHA-256 of their canonical JSON (sorted keys, no spaces).

One definition for everything that names args by digest: the manager's Idempotency-Key binding,
the MCP door's confirmation, the local run's audit entry and the approval webhooks' messages. It
must never change for the same args (stored digests are compared with new ones).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def args_digest(args: Any) -> str:
    """SHA-256 (hex) of ``args`` as canonical JSON; what JSON cannot hold is taken as text."""
    return hashlib.sha256(_CANONICAL(args).encode()).hexdigest()


# Built once: json.dumps with keyword arguments builds a new encoder for every call.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode


__all__ = ["args_digest"]
