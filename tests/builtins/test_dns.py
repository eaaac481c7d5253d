"""probe_dns against the host's real resolver: localhost, IP literals, a reserved .invalid name."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Reach
from ongrid_skills.builtins.dns import probe_dns
from ongrid_skills.builtins.netrules import NetRules
from tests.support.builtins import assert_schema

#: The loopback targets these tests use, allowed explicitly (an allow list: nothing else).
LOOPBACK = Reach(net=NetRules.parse(allow=["127.0.0.0/8", "::1", "localhost"]))


def run(**args: Any) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(probe_dns(BuiltinContext(reach=LOOPBACK), **args))
    return result


def test_schema_requires_name_and_lists_record_types() -> None:
    schema = assert_schema(probe_dns, ["name"], {"timeout_ms": (1, 30000)})
    assert schema["properties"]["record_type"]["enum"] == ["A", "AAAA", "ANY"]
    assert schema["properties"]["record_type"]["default"] == "A"


def test_localhost_resolves_to_loopback() -> None:
    result = run(name="localhost")
    assert result["name"] == "localhost"
    assert result["record_type"] == "A"
    assert "127.0.0.1" in result["addresses"]
    assert all(":" not in address for address in result["addresses"])
    assert result["elapsed_ms"] >= 0


def test_any_returns_every_family_without_duplicates() -> None:
    result = run(name="localhost", record_type="ANY")
    assert "127.0.0.1" in result["addresses"]
    assert len(result["addresses"]) == len(set(result["addresses"]))


def test_aaaa_returns_only_ipv6_or_a_note() -> None:
    result = run(name="localhost", record_type="AAAA")
    assert all(":" in address for address in result["addresses"])
    if not result["addresses"]:
        assert "no AAAA" in result["note"]


def test_ip_literal_resolves_to_itself() -> None:
    assert run(name="127.0.0.1")["addresses"] == ["127.0.0.1"]


def test_nonexistent_name_fails() -> None:
    with pytest.raises(BuiltinFailure, match=r"nonexistent\.invalid"):
        run(name="nonexistent.invalid", record_type="ANY", timeout_ms=10000)


def test_nonexistent_name_fails_for_a_single_family() -> None:
    with pytest.raises(BuiltinFailure, match=r"nonexistent\.invalid"):
        run(name="nonexistent.invalid", record_type="A", timeout_ms=10000)


@pytest.mark.parametrize("name", ["", "-x.example", "a b", "tab\there", "x" * 300])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(BuiltinFailure):
        run(name=name)


def test_unknown_record_type_is_refused() -> None:
    with pytest.raises(BuiltinFailure, match="record_type"):
        run(name="localhost", record_type="MX")
