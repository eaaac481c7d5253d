"""The start-up of the long-running commands (``serve``, ``mcp``, ``worker``): the collector
waits until it is done, then leaves what it built alone.

Their start-up imports a server stack (FastAPI, the MCP SDK, SQLAlchemy, the NATS client) and
builds an app: a few hundred thousand objects that live until the process ends. With the
collector on, the growing heap triggers full passes over all of them again and again while
they are made (0.2-0.3 s of serve's start-up). Off during :func:`starting`, then everything
made so far is frozen (``gc.freeze``: no later pass walks it again) and the collector goes on
as usual for what the running command allocates.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def starting() -> Iterator[None]:
    """No collection inside the block; what exists at its end is frozen, then collection is on
    again (also when the block fails)."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
