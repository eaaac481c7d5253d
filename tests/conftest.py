"""The suite's one conftest: the shared fixtures, and an environment free of ONGRID_* settings.

Settings come from the environment first, so a variable left in the developer's shell (or set by
one test) would change what another test loads. Every test starts with none of them but those of
SUITE_ENVIRONMENT; so do the module- and package-wide fixtures, set up before any test's own.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pytest

pytest_plugins = [
    "tests.support.skills",
    "tests.support.server",
    "tests.support.llm",
    "tests.support.browser",
    "tests.support.postgres",
    "tests.support.replicas",
    "tests.support.unprivileged",
    "tests.support.nats",
    "tests.support.fleet",
    "tests.support.netns",
]

#: Set for every test: the bundled catalogue stays out (tests count skills and loader lines
#: exactly) unless a test asks for it (bundled=True, or ONGRID_BUNDLED_SKILLS=1 for a child).
SUITE_ENVIRONMENT = {"ONGRID_BUNDLED_SKILLS": "0"}


def _reset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("ONGRID_")]:
        monkeypatch.delenv(name)
    for name, value in SUITE_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection left on the heap (the modules, the collected tests): it lives
    until the session ends, and the collector's full passes, triggered again and again by
    what the tests allocate, then no longer walk it (tests/doors/rest: 10 s in the collector
    before, 5 s after). What the tests themselves leave is collected as before."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def ongrid_environment_for_the_session() -> Iterator[None]:
    """The same reset for the session, so wider-scoped fixtures see it too."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _reset(monkeypatch)
        yield


@pytest.fixture(autouse=True)
def ongrid_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ONGRID_* variable but those of SUITE_ENVIRONMENT, for the duration of each test."""
    _reset(monkeypatch)
