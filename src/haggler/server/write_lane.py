"""Where a request's database writes run: on the event loop when they need not wait, in a few
worker threads when they must.

A turn — negotiate.v1's chat turn, a polling match agent's pickup or respond — is a fraction of
a millisecond of work, less than the hop to a worker thread and back costs. On SQLite such a write
first runs right on the event loop, without waiting (``Database.without_waiting``); only when the
database is busy (another write of this process, another process's lock) does it go to a thread,
where waiting blocks nobody else. The threads are few (``slots``) and served in order: writes to
one SQLite database are serialized anyway, and dozens of threads queued on that lock only fight
the event loop for the GIL. On PostgreSQL the work runs on the event loop with its round trips
awaited there (``Database.run_on_loop``).

The work handed to the lane must be safe to run again from the start: a write that would wait
raises ``WouldBlock`` having done nothing, but what the function did before it (a read, an earlier
write of its own that committed) is done once more in the thread.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import anyio
import anyio.to_thread

from haggler.storage.database import Database, WouldBlock

__all__ = ["WriteLane"]

T = TypeVar("T")


class WriteLane:
    """Runs ``fn(*args)`` — synchronous code using the database's ``write()`` and ``read()`` —
    for a request, as the module's docstring says. One per app, shared by every route that uses
    it, so that its threads bound all of the process's waiting SQLite writes together."""

    def __init__(self, db: Database, slots: int = 2) -> None:
        self.db = db
        self.slots = slots
        self._limiter: anyio.CapacityLimiter | None = None  # created inside the event loop

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        if not self.db.is_sqlite:
            return await self.db.run_on_loop(fn, *args)
        try:
            with self.db.without_waiting():
                return fn(*args)
        except WouldBlock:  # the database is busy: wait in a thread, where waiting blocks nobody
            pass
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.slots)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)
