"""server/request_log.LoopBatchedHandler: the access lines of one event-loop turn reach the stream
in one write, in order; outside an event loop a line is written at once; nothing is lost."""

from __future__ import annotations

import asyncio
import io
import logging

from haggler.server.request_log import LoopBatchedHandler


class _Stream(io.StringIO):
    """A real text stream that remembers each write it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def _logger(stream: _Stream) -> logging.Logger:
    logger = logging.getLogger(f"haggler.test.batched.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = LoopBatchedHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    return logger


def test_one_loop_turn_is_one_write_in_order():
    stream = _Stream()
    logger = _logger(stream)

    async def run() -> None:
        for n in range(5):
            logger.info("line %d", n)
        assert stream.writes == []  # held until the loop turns
        await asyncio.sleep(0)
        logger.info("next turn")
        await asyncio.sleep(0)

    asyncio.run(run())
    assert stream.writes == ["line 0\nline 1\nline 2\nline 3\nline 4\n", "next turn\n"]


def test_outside_an_event_loop_a_line_is_written_at_once_and_close_loses_nothing():
    stream = _Stream()
    logger = _logger(stream)
    logger.info("no loop here")
    assert stream.writes == ["no loop here\n"]

    async def run() -> None:
        logger.info("pending when the handler closes")

    asyncio.run(run())  # the loop closed before its next turn could write the line
    for handler in logger.handlers:
        handler.close()
    assert stream.getvalue() == "no loop here\npending when the handler closes\n"
