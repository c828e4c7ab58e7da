"""HTTP/1.1 over a plain socket, for what an HTTP client library will not do: declare a body it
never sends, stop a chunked body halfway, repeat the Host header. The server answers before the
request is complete or not at all; a test that hangs here times out instead."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def exchange(port: int, head: str, chunks: Iterable[bytes] = (), *, timeout: float = 10) -> RawResponse:
    """Send ``head`` (request line and headers, without the blank line that ends them), then
    ``chunks`` as they are, and read the response up to its Content-Length."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n\r\n")
        for chunk in chunks:
            sock.sendall(chunk)
        received = b""
        while b"\r\n\r\n" not in received:
            received += _recv(sock)
        head_bytes, _, body = received.partition(b"\r\n\r\n")
        status_line, *lines = head_bytes.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        while len(body) < int(headers.get("content-length", "0")):
            body += _recv(sock)
        return RawResponse(int(status_line.split()[1]), headers, body)


def chunk(data: bytes) -> bytes:
    """One chunk of a ``Transfer-Encoding: chunked`` body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _recv(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    if not data:
        raise ConnectionError("the server closed the connection before answering in full")
    return data
