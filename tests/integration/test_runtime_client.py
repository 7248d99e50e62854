"""The invoker's runtime client against real sockets: answers framed however they arrive,
connections kept or dropped as they should be, and a broken runtime seen as gone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from faasrl.invoker.runtime_client import RuntimeClient, RuntimeGone

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def answer(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in extra)
    return (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{head}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    return await reader.readexactly(length)


def run_against(serve: Serve, scenario: Callable[[RuntimeClient], Awaitable[object]]) -> object:
    """``scenario`` with a client of a server on a free port that runs ``serve`` per
    connection; also returns how many connections the server saw."""
    async def main() -> object:
        connections = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            try:
                await serve(reader, writer)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = RuntimeClient("127.0.0.1", port, "s3cret")
        try:
            out = await asyncio.wait_for(scenario(client), 10)
        finally:
            client.close()
            server.close()
        return out, connections

    return asyncio.run(main())


def test_answers_split_byte_by_byte_arrive_whole_and_the_connection_is_reused():
    async def serve(reader, writer):
        while True:
            body = await read_request(reader)
            for i in range(len(data := answer(body))):  # one byte a write
                writer.write(data[i:i + 1])
                await writer.drain()

    async def scenario(client):
        return [await client.request("POST", "/run", {"n": n}) for n in range(3)]

    answers, connections = run_against(serve, scenario)
    assert answers == [(200, {"n": n}) for n in range(3)]
    assert connections == 1


def test_connection_close_is_honoured():
    async def serve(reader, writer):
        await read_request(reader)
        writer.write(answer(b"{}", "Connection: close"))

    async def scenario(client):
        return [await client.request("GET", "/healthz") for _ in range(2)]

    answers, connections = run_against(serve, scenario)
    assert answers == [(200, {})] * 2 and connections == 2


@pytest.mark.parametrize("reply", [
    answer(b'{"half": ')[:-3],  # closed mid-body
    b"HTTP/1.1 200 OK\r\nContent-Le",  # closed mid-head
    b"garbage\r\n\r\n",  # not HTTP
    b"",  # closed without a word
], ids=["mid-body", "mid-head", "not-http", "silent"])
def test_a_runtime_that_breaks_off_is_gone(reply):
    async def serve(reader, writer):
        await read_request(reader)
        writer.write(reply)

    async def scenario(client):
        with pytest.raises(RuntimeGone):
            await client.request("POST", "/run", {})
        return client._idle

    idle, _ = run_against(serve, scenario)
    assert idle == []  # nothing broken is kept for the next request


def test_a_timeout_drops_the_connection_mid_exchange():
    async def serve(reader, writer):
        while True:
            body = await read_request(reader)
            if body == b'{"slow":true}':
                await asyncio.sleep(1.0)
            writer.write(answer(body))

    async def scenario(client):
        with pytest.raises(TimeoutError):
            await client.request("POST", "/run", {"slow": True}, timeout=0.1)
        return await client.request("POST", "/run", {"fast": True})

    fast, connections = run_against(serve, scenario)
    assert fast == (200, {"fast": True})
    assert connections == 2  # the late answer never lands on a reused connection


def test_the_secret_goes_as_a_bearer_token():
    async def serve(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(b'"yes"' if b"Authorization: Bearer s3cret\r\n" in head else b'"no"'))

    (status, out), _ = run_against(serve, lambda client: client.request("GET", "/healthz"))
    assert (status, out) == (200, "yes")
