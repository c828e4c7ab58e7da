"""One send per response: uvicorn's HTTP protocol over a transport that coalesces writes.

uvicorn writes a response's status line and headers when the app starts the response, and its
body when the app sends it: two ``send`` system calls for every JSON answer the store gives, where
one would do. On this kind of machine a send costs as much as a good part of a chat turn (a
profile of the store under load put a quarter of the server's CPU in those two writes). The
transport here holds what is written during one turn of the event loop and hands it to the
socket as one write at the end of that turn, so a response whose headers and body are sent
together leaves in one send; a streamed body still leaves as it comes, a loop turn at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["CoalescingHttpToolsProtocol"]


class _CoalescingTransport:
    """Writes of one event-loop turn reach ``transport`` as one write; everything else is the
    transport's own (closing flushes first, so nothing written is lost)."""

    __slots__ = ("_transport", "_loop", "_pending")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing through a :class:`_CoalescingTransport`; give it to
    uvicorn as ``http=``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
