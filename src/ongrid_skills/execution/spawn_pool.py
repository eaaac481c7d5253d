"""Spawning in worker threads, for a runner that has other calls in flight.

A spawn returns only once the child has exec'd (a millisecond on a loaded machine), and the event
loop must not stand still meanwhile: :class:`SpawnPool` runs the spawner in threads (as many as
there are cores). Split from :mod:`ongrid_skills.execution.spawner`.

It must never leave a child behind: one spawned for a call cancelled while its thread spawned is
killed, its descriptors closed and it is reaped as soon as it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from ongrid_skills.execution.spawner import Child, Spawner


class SpawnPool:
    """Spawns in worker threads (as many as there are cores: more spawns at once than cores
    only slows each down)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 2
        self._executor: ThreadPoolExecutor | None = None

    async def spawn(
        self,
        spawner: Spawner,
        path: str,
        cwd: str,
        env: Mapping[str, str],
        payload: bytes,
        conf: Sequence[int] | None = None,
        check: bool = False,
    ) -> Child:
        """Spawn in a worker thread (the descriptors are not added to any epoll). Cancelled
        while the thread spawns, the child is killed and reaped as soon as it exists."""
        executor = self._executor
        if executor is None:
            executor = self._executor = ThreadPoolExecutor(
                self.workers, thread_name_prefix="ongrid-spawn"
            )
        future = executor.submit(spawner.spawn, path, cwd, env, payload, -1, conf, False, check)
        try:
            return await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            future.add_done_callback(_discard)
            raise


def _discard(future: Future[Child]) -> None:
    """A child spawned for a call that was cancelled meanwhile: kill, close, reap."""
    if future.cancelled() or future.exception() is not None:
        return
    child = future.result()
    with contextlib.suppress(OSError):
        os.killpg(child.pid, signal.SIGKILL)
    for fd in (child.stdin, child.stdout, child.stderr, child.pidfd):
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
    with contextlib.suppress(ChildProcessError):
        _, status = os.waitpid(child.pid, 0)
        child.reaped(os.waitstatus_to_exitcode(status))


__all__ = ["SpawnPool"]
