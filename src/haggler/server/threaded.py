"""A haggler app under uvicorn in a thread of this process, on a free loopback port: what the
end-to-end tests and ``haggler market demo`` run their real HTTP server with (a thread, so that
the caller can share objects such as a clock with the app). It stops when the ``with`` ends."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from haggler.server.coalescing import CoalescingHttpToolsProtocol


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThreadedServer:
    def __init__(self, app: object) -> None:
        # Bound here and handed to uvicorn, not picked free and bound later: no other process can
        # take the port in between.
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",  # type: ignore[arg-type]
                                proxy_headers=False, lifespan="on", http=CoalescingHttpToolsProtocol)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> "ThreadedServer":
        self.thread.start()
        deadline = time.monotonic() + 60  # seconds when idle; a loaded machine is slow, not broken
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.socket.close()
