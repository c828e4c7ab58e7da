"""A loopback TCP server whose every connection a test answers byte by byte: for what a real HTTP
server will not do (trickle an answer, send a body without end), optionally behind TLS with a
certificate the test made. The counterpart of ``rawhttp.py``, which is a raw client."""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Callable

#: What a connection is answered: called with a ``send`` that sends bytes whole and counts them.
Answer = Callable[[Callable[[bytes], None]], None]


def read_request(sock: socket.socket) -> bytes:
    """The request's head and the body its Content-Length declares."""
    received = b""
    while b"\r\n\r\n" not in received:
        data = sock.recv(65536)
        if not data:
            return received
        received += data
    head, _, body = received.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        data = sock.recv(65536)
        if not data:
            break
        body += data
    return head + b"\r\n\r\n" + body


class RawServer:
    """``answer(send)`` runs in a thread of its own for each connection, once its request is read;
    ``requests`` holds what each connection asked, ``sent`` how many bytes the answers sent."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None) -> None:
        self._answer = answer
        self._tls = tls
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.requests: list[bytes] = []
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "RawServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            sock = self._tls.wrap_socket(conn, server_side=True) if self._tls else conn
            with sock:
                request = read_request(sock)
                with self._lock:
                    self.requests.append(request)
                self._answer(lambda data: self._send(sock, data))
        except (OSError, ssl.SSLError):
            pass  # the client hung up: what these tests are about

    def _send(self, sock: socket.socket, data: bytes) -> None:
        sock.sendall(data)
        with self._lock:
            self.sent += len(data)
