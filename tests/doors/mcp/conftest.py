"""One real `serve` and data dir for every MCP test; tests take a `transport` (stdio, http)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.mcp import World, start_world, stop_world


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    started = start_world(tmp_path_factory.mktemp("mcp"))
    try:
        yield started
    finally:
        stop_world(started)


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value
