"""Size caps on what a frontmatter author declares and we store, show and serve.

Every text field kept from a frontmatter (``description``, ``when_to_use``, a persona's
``critical_reminder``) is cut at :data:`MAX_TEXT_CHARS`; every kept-as-written field of
``extra`` (``license``, ``allowed-tools``, ``metadata.openclaw``…) is kept only when its JSON is
at most :data:`MAX_FIELD_BYTES`, and all of them together at most :data:`MAX_EXTRA_BYTES` —
a field over the cap is replaced by a note saying so, with a warning. So ``show``, ``list
--json``, ``GET /v1/skills`` and ``read_skill`` answer in bounded size whatever a file holds.
It never fails a file for an oversized field: the field is replaced, the rest is kept.

>>> warnings = []
>>> cap_text("x" * 5000, "description", warnings)[-3:], len(warnings)
('xx…', 1)
"""

from __future__ import annotations

import json
from typing import Any

from ongrid_skills.skills.notices import FIELD_CAPPED, Notice

MAX_TEXT_CHARS = 4096
MAX_FIELD_BYTES = 8 * 1024
MAX_EXTRA_BYTES = 32 * 1024

Warnings = list[Notice]


def cap_text(value: str, key: str, warnings: Warnings) -> str:
    """``value`` cut at :data:`MAX_TEXT_CHARS` (with ``…``), with a warning when it was."""
    if len(value) <= MAX_TEXT_CHARS:
        return value
    warnings.append(
        Notice(
            FIELD_CAPPED, key, f"{key} is {len(value)} characters; kept the first {MAX_TEXT_CHARS}"
        )
    )
    return value[: MAX_TEXT_CHARS - 1] + "…"


def cap_extra(extra: dict[str, Any], warnings: Warnings) -> dict[str, Any]:
    """``extra`` with every field over its cap (or past the total cap) replaced by a note."""
    out: dict[str, Any] = {}
    total = 0
    for key, value in extra.items():
        size = _json_size(value)
        if size > MAX_FIELD_BYTES:
            warnings.append(
                Notice(
                    FIELD_CAPPED,
                    key,
                    f"{key} is {size} bytes as JSON, over {MAX_FIELD_BYTES}: not kept",
                )
            )
            out[key] = f"(not kept: {size} bytes, over the {MAX_FIELD_BYTES}-byte cap)"
            continue
        if total + size > MAX_EXTRA_BYTES:
            warnings.append(
                Notice(
                    FIELD_CAPPED,
                    key,
                    f"{key} not kept: the declared fields pass {MAX_EXTRA_BYTES} bytes",
                )
            )
            out[key] = f"(not kept: the declared fields pass {MAX_EXTRA_BYTES} bytes)"
            continue
        total += size
        out[key] = value
    return out


def _json_size(value: Any) -> int:
    """The size of ``value`` as JSON; a short text is counted without serialising it."""
    if isinstance(value, str) and len(value) <= MAX_FIELD_BYTES // 6:  # even all escaped, it fits
        return len(value) + 2
    if value is None or isinstance(value, bool):
        return 5
    return len(json.dumps(value, ensure_ascii=False, default=str))
