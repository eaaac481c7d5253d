"""The HTTP status of each error code, for the doors that answer over HTTP.

One table for the REST API and the web console, so a code answers the same status through both
(SPEC §9); a code it does not list answers 400. It holds data only: it must never import a door,
and the doors that use it must not import each other through it.
"""

from __future__ import annotations

STATUS_BY_CODE = {
    "invalid_args": 400,
    "invalid_request": 400,
    "invalid_manifest": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "denied": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "credential_missing": 409,
    "credential_unreadable": 502,
    "sandbox_unavailable": 503,
    "too_large": 413,
    "busy": 429,
    "storage_full": 507,
    "invalid_config": 500,
    "internal_error": 500,
    # Packs (docs/packs.md): a pack that is refused, a name it would take, a source that failed.
    "invalid_pack": 400,
    "unsafe_pack": 400,
    "invalid_key": 400,
    "passphrase_required": 400,
    "bad_signature": 400,
    "untrusted_pack": 403,
    "skill_collision": 409,
    "fetch_failed": 502,
    "invalid_index": 502,
    "digest_mismatch": 502,
}
