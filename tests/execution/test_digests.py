"""The args digest: one canonical form, whatever the key order or the door."""

from __future__ import annotations

import hashlib

from ongrid_skills.execution.digests import args_digest


def test_the_same_args_in_any_key_order_have_one_digest_and_other_args_another() -> None:
    assert args_digest({"b": 1, "a": [1, "é"]}) == args_digest({"a": [1, "é"], "b": 1})
    assert args_digest({"a": 1}) != args_digest({"a": "1"})
    canonical = '{"a":[1,"é"],"b":1}'.encode()
    assert args_digest({"b": 1, "a": [1, "é"]}) == hashlib.sha256(canonical).hexdigest()
