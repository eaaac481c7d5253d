"""The uvicorn server ``serve`` runs: an orderly stop on SIGTERM/SIGINT ends with status 0.

uvicorn re-raises the signal it caught once it has shut down gracefully, so a supervisor
(systemd, make) would see death by SIGTERM (status 143) for what was an orderly stop. Imported
only by ``serve`` (uvicorn is not needed by other commands). It must not open the store or
build the app: ``serve`` hands it a config.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import uvicorn


class GracefulServer(uvicorn.Server):
    """uvicorn's server; ``stopped_by`` names the signal that stopped it (None otherwise)."""

    stopped_by: int | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self._stop) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, sig: int, _frame: FrameType | None) -> None:
        self.stopped_by = sig
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: do not wait for open connections
        self.should_exit = True
