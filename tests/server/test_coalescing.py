"""server/coalescing.py: what is written to a connection in one turn of the event loop leaves in
one write to the real transport, in order; closing sends what is pending first; and a response
served through uvicorn with the coalescing protocol arrives whole, headers and body."""

from __future__ import annotations

import asyncio
import socket

import httpx

from haggler.server.coalescing import _CoalescingTransport


class _Counting:
    """The real transport, with its writes counted."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.transport.write(data)

    def __getattr__(self, name: str):
        return getattr(self.transport, name)


async def _connected() -> tuple[_Counting, _CoalescingTransport, socket.socket]:
    """A real TCP connection on loopback: our side's transport, and the peer's plain socket."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    peer = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    listener.close()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, accepted)
    counting = _Counting(transport)  # type: ignore[arg-type]
    return counting, _CoalescingTransport(counting, loop), peer  # type: ignore[arg-type]


def _receive_all(peer: socket.socket) -> bytes:
    peer.settimeout(5)
    chunks = []
    while chunk := peer.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_writes_of_one_loop_turn_leave_as_one_write_in_order():
    async def run() -> tuple[list[bytes], bytes]:
        counting, coalescing, peer = await _connected()
        coalescing.write(b"HTTP/1.1 200 OK\r\n\r\n")
        coalescing.write(b"{\"a\":")
        coalescing.writelines([b"1", b"}"])
        assert counting.writes == []  # held until the loop turns
        await asyncio.sleep(0)
        coalescing.write(b"next turn")
        await asyncio.sleep(0)
        coalescing.close()
        await asyncio.sleep(0.05)
        return counting.writes, await asyncio.to_thread(_receive_all, peer)

    writes, received = asyncio.run(run())
    assert writes == [b"HTTP/1.1 200 OK\r\n\r\n{\"a\":1}", b"next turn"]
    assert received == b"HTTP/1.1 200 OK\r\n\r\n{\"a\":1}next turn"


def test_closing_sends_what_is_pending_and_abort_drops_it():
    async def run() -> tuple[bytes, bytes]:
        counting, coalescing, peer = await _connected()
        coalescing.write(b"last words")
        coalescing.close()  # before the loop turns: still sent, then the connection closes
        other_counting, other, other_peer = await _connected()
        other.write(b"never sent")
        other.abort()
        await asyncio.sleep(0.05)
        assert other_counting.writes == []
        return (await asyncio.to_thread(_receive_all, peer),
                await asyncio.to_thread(_receive_all, other_peer))

    closed, aborted = asyncio.run(run())
    assert closed == b"last words"
    assert aborted == b""


def test_the_store_answers_whole_through_the_coalescing_protocol(store):
    """ThreadedServer (like `haggler serve`) runs uvicorn with the coalescing protocol: a JSON answer,
    a page and a chat turn arrive complete, over one keep-alive connection."""
    with httpx.Client(base_url=store.base, timeout=10) as client:
        for _ in range(3):
            started = client.get(f"/api/store/chat/start?product_id={store.catalog.products[0].id}")
            assert started.status_code == 201 and started.json()["session_id"]
            reply = client.get(started.json()["next"].replace("{url_encoded_message}", "hi"))
            assert reply.status_code == 200 and reply.json()["next"]
        page = client.get("/")
        assert page.status_code == 200 and page.text.rstrip().endswith("</html>")
        assert int(page.headers["content-length"]) == len(page.content)
