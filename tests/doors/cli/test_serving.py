"""serve's HTTP protocol: httptools with a bound on the request head, on a real loopback server."""

from __future__ import annotations

import asyncio
import select
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from ongrid_skills.doors.cli.serving import BoundedHttpTools

LIMIT = 4096
SEEN: list[tuple[str, int]] = []


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Answers 200 with the size of the body it read."""
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    SEEN.append((scope["path"], size))
    payload = str(size).encode()
    headers = [(b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


Client = Callable[[int], Awaitable[None]]


def serving(client: Client) -> None:
    """Run ``client(port)`` against a uvicorn server speaking BoundedHttpTools on loopback."""
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        http=BoundedHttpTools,
        h11_max_incomplete_event_size=LIMIT,
        log_level="critical",
        lifespan="off",
    )
    server = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            while not server.started:
                await asyncio.sleep(0.01)
            await asyncio.wait_for(client(port), 20)
        finally:
            server.should_exit = True
            await task

    try:
        asyncio.run(main())
    finally:
        sock.close()


async def exchange(port: int, *pieces: bytes) -> tuple[int, bytes]:
    """Send ``pieces`` one write each, stopping once the server answers, and read the answer."""
    return await asyncio.to_thread(_exchange, port, pieces)


def _exchange(port: int, pieces: tuple[bytes, ...]) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for piece in pieces:
            try:
                sock.sendall(piece)
            except OSError:  # the server answered and closed while we were still sending
                break
            # Wait a moment for an answer: a server that closes with unread bytes resets the
            # connection, and a reset can drop an answer the client has not read yet.
            if select.select([sock], [], [], 0.05)[0]:
                break
        data = b""
        while b"\r\n\r\n" not in data or len(data) < _end(data):
            part = sock.recv(65536)
            if not part:
                break
            data += part
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    return int(data[9:12]), data[data.find(b"\r\n\r\n") + 4 : _end(data)]


def _end(data: bytes) -> int:
    """Where the answer in ``data`` ends (its head must be complete)."""
    head_end = data.find(b"\r\n\r\n") + 4
    for line in data[:head_end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return head_end + int(value)
    return len(data) + 1  # no length: read to the end


def request(path: str = "/", headers: bytes = b"", body: bytes = b"") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n".encode()
        + headers
        + b"\r\n"
        + body
    )


def test_a_head_under_the_bound_and_a_body_over_it_are_served() -> None:
    async def client(port: int) -> None:
        big_body = b"b" * (LIMIT * 50)
        assert await exchange(port, request(headers=b"X-A: " + b"a" * 3000 + b"\r\n")) == (
            200,
            b"0",
        )
        assert await exchange(port, request(body=big_body)) == (200, str(len(big_body)).encode())

    serving(client)


def test_a_complete_head_over_the_bound_in_one_read_gets_400() -> None:
    async def client(port: int) -> None:
        status, _ = await exchange(port, request(headers=b"X-A: " + b"a" * LIMIT + b"\r\n"))
        assert status == 400
        many = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 100) for i in range(50))
        status, _ = await exchange(port, request(headers=many))
        assert status == 400
        status, _ = await exchange(port, request("/" + "u" * LIMIT))
        assert status == 400
        assert await exchange(port, request("/after")) == (200, b"0")  # still serving

    SEEN.clear()
    serving(client)
    assert SEEN == [("/after", 0)]


def test_a_header_that_never_ends_gets_400_once_past_the_bound() -> None:
    async def client(port: int) -> None:
        start = b"GET / HTTP/1.1\r\nHost: x\r\nX-Huge: "
        pieces = [b"h" * 16_384 for _ in range(64)]  # 1 MiB, never finished
        status, _ = await exchange(port, start, *pieces)
        assert status == 400
        url_pieces = [b"u" * 16_384 for _ in range(64)]
        status, _ = await exchange(port, b"GET /", *url_pieces)
        assert status == 400

    serving(client)


def test_a_head_split_over_many_reads_counts_as_one() -> None:
    async def client(port: int) -> None:
        head = request(headers=b"X-A: " + b"a" * (LIMIT + 100) + b"\r\n")
        status, _ = await exchange(port, *(head[i : i + 100] for i in range(0, len(head), 100)))
        assert status == 400
        fits = request(headers=b"X-A: " + b"a" * 3000 + b"\r\n")
        assert await exchange(port, *(fits[i : i + 100] for i in range(0, len(fits), 100))) == (
            200,
            b"0",
        )

    serving(client)


def test_keep_alive_requests_each_get_their_own_bound() -> None:
    async def client(port: int) -> None:
        one = request(headers=b"X-A: " + b"a" * 3000 + b"\r\n")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in range(5):  # 5 heads of 3 KB on one connection: 15 KB in all
                writer.write(one)
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200"), head
                await reader.readexactly(1)
        finally:
            writer.close()

    serving(client)
