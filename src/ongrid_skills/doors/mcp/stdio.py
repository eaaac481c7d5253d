"""The stdio of ``ongrid-skills mcp`` on the event loop's own pipes, for the SDK's transport.

The MCP SDK's ``stdio_server`` reads and writes through anyio's file wrapper, which runs every
readline, write and flush in a worker thread: each request and each answer crossed to a thread
and back, about 0.24 ms of every ``tools/call`` here. :func:`stdio_streams` gives it the same
two text streams on asyncio's pipe transports instead (no thread); the SDK still parses, frames
and answers every message.

Like the SDK, it first takes the standard descriptors for the wire: the wire is served from
private duplicates, fd 0 then reads the null device and fd 1 writes to stderr, so stray output of
the process (a library's print) can never corrupt the wire. Both are restored on exit, blocking
again, and by :func:`release` before the process dies of a signal. When stdin or stdout is not a
pipe, socket or terminal (a file redirected into it), or is a device the event loop cannot watch
(``/dev/null``), it yields nothing and the SDK's own streams are used.

A request line longer than :data:`LINE_LIMIT` is dropped whole, not buffered: the SDK receives an
empty line in its place, reports it as a parse error and goes on with the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import selectors
import stat
from collections.abc import AsyncIterator, Callable, Iterator

LINE_LIMIT = 64 * 1024 * 1024  # bytes of one request line
CLOSE_SECONDS = 1.0  # for the last answers to leave, on exit


class LineReader:
    """stdin as text lines, iterated like anyio's file wrapper."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # end of input
            if not exc.partial:
                raise StopAsyncIteration from None
            line = exc.partial  # a last line without its newline
        except asyncio.LimitOverrunError as exc:
            await self._drop_line(exc.consumed)
            return ""
        return line.decode("utf-8", errors="replace")

    async def _drop_line(self, consumed: int) -> None:
        """Discard the rest of an overlong line, up to and with its newline."""
        while True:
            await self.reader.readexactly(consumed)
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed
            except asyncio.IncompleteReadError:
                return


class LineWriter:
    """stdout as text, written and flushed like anyio's file wrapper."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[LineReader, LineWriter] | None]:
    """This process's stdin and stdout as the SDK's text streams, served on the event loop; None
    when either cannot be (not a pipe, socket or terminal)."""
    if not (_pollable(0) and _pollable(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    with _claimed(0, _null_input) as wire_in, _claimed(1, _stderr_output) as wire_out:
        reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            os.fdopen(_above_std(wire_in), "rb", buffering=0),  # the transport's own copy
        )
        write_transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
            os.fdopen(_above_std(wire_out), "wb", buffering=0),
        )
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        try:
            yield LineReader(reader), LineWriter(writer)
        finally:
            read_transport.close()
            with contextlib.suppress(Exception):  # what is still unsent, if the client reads
                await asyncio.wait_for(writer.drain(), CLOSE_SECONDS)
            if not write_transport.is_closing():  # lost already: a broken pipe closed it
                write_transport.abort()


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    # Why a probe: some character devices cannot be polled (/dev/null, /dev/zero: epoll refuses
    # them). asyncio would only log that refusal and never read, and the server would wait
    # forever instead of seeing the end of its input.
    with selectors.DefaultSelector() as probe:
        try:
            probe.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


def _null_input() -> int:
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


def _above_std(fd: int) -> int:
    """A copy of ``fd`` above 0-2 (never taking a standard stream's number), not inherited by
    children. Each transport gets one and closes it (some event loops close what they are
    given); the copy kept to restore the standard descriptor stays ours."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def _stderr_output() -> int:
    try:
        return os.dup(2)
    except OSError:  # stderr closed: stray output goes nowhere rather than onto the wire
        return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


def release() -> None:
    """Give the claimed descriptors back now, blocking as they were: for a process about to die
    of a signal without unwinding (:func:`stdio_streams` must not be used afterwards). Their
    descriptions are shared with the client, a terminal's with its shell, and would otherwise
    stay non-blocking after this process is gone."""
    while _CLAIMS:
        _CLAIMS.pop()()


_CLAIMS: list[Callable[[], None]] = []  # the restorations of the claims in force, newest last


@contextlib.contextmanager
def _claimed(fd: int, diversion: Callable[[], int]) -> Iterator[int]:
    """A private duplicate of ``fd`` for the wire while ``fd`` itself points at ``diversion()``;
    on exit ``fd`` is the wire again (blocking, as it was) and the duplicate is closed."""
    wire = _above_std(fd)
    blocking = os.get_blocking(wire)
    restored = False

    def restore() -> None:
        nonlocal restored
        if not restored:
            restored = True
            os.dup2(wire, fd)
            os.set_blocking(fd, blocking)
            os.close(wire)

    _CLAIMS.append(restore)
    try:
        other = diversion()
        try:
            os.dup2(other, fd)
        finally:
            os.close(other)
        yield wire
    finally:
        with contextlib.suppress(ValueError):  # release() restored it already
            _CLAIMS.remove(restore)
        restore()


__all__ = ["CLOSE_SECONDS", "LINE_LIMIT", "LineReader", "LineWriter", "release", "stdio_streams"]
