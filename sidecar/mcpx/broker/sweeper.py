"""The deadline sweeper: questions expire at their deadline whether or not anything reads them (SPEC section 3).

It owns the heap of deadlines and the task that sleeps until the nearest; what expiring means (the write, the
askers woken) is the broker's, handed in as `expire`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

log = logging.getLogger("mcpx.broker")

LONGEST = 3600.0  # the sweeper looks again at least this often, even with no deadline due


class Sweeper:
    """`expire(due, now)`: end the questions `due` that are still pending, and say how many it ended."""

    def __init__(self, expire: Callable[[list[str], float], Awaitable[int]]) -> None:
        self._expire = expire
        self._deadlines: list[tuple[float, str]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def fill(self, deadlines: Iterable[tuple[float, str]]) -> None:
        """The deadlines of the questions found pending at start."""
        for entry in deadlines:
            heapq.heappush(self._deadlines, entry)

    def due(self, expires: float, eid: str) -> None:
        """`eid` ends at `expires` (epoch seconds); the sweeper wakes for it if it is now the nearest."""
        heapq.heappush(self._deadlines, (expires, eid))
        if self._deadlines[0][1] == eid:
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._sweep(), name="mcpx-sweeper")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})  # its end, without taking a cancel of stop() itself for it
            self._task = None

    async def expire_due(self, now: float | None = None) -> int:
        """Expire what is due at `now` (default: now); how many questions it ended."""
        now = time.time() if now is None else now
        taken: list[tuple[float, str]] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            taken.append(heapq.heappop(self._deadlines))
        if not taken:
            return 0
        try:
            return await self._expire([eid for _, eid in taken], now)
        except BaseException:
            # not written (the store busy past its timeout, PostgreSQL away, the daemon stopping): the deadlines go
            # back on the heap, or the sweeper's retry would find nothing due and these would stay pending forever
            for entry in taken:
                heapq.heappush(self._deadlines, entry)
            raise

    async def _sweep(self) -> None:
        while True:
            try:
                await self.expire_due()
            except Exception:  # a failed sweep must not end sweeping
                log.exception("expiring questions failed; retrying")
                await asyncio.sleep(1)
                continue
            self._wake.clear()
            delay = (self._deadlines[0][0] - time.time()) if self._deadlines else LONGEST
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancel that comes as the event is set
            # (a question opened as the daemon stops), and stop() would then wait for the next deadline
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, min(delay, LONGEST))):
                    await self._wake.wait()
