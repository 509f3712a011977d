"""A call's own timeout that stands still while a question waits for an answer.

A person taking four minutes to answer must not kill the call; a server that simply hangs must.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class CallTimeout(Exception):
    pass


class PausableDeadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._left = seconds
        self._since = time.monotonic()
        self._paused = 0
        self._changed = asyncio.Event()

    def pause(self) -> None:
        if self._paused == 0:
            self._left -= time.monotonic() - self._since
        self._paused += 1
        self._changed.set()

    def resume(self) -> None:
        self._paused = max(0, self._paused - 1)
        if self._paused == 0:
            self._since = time.monotonic()
        self._changed.set()

    @property
    def paused(self) -> bool:
        return self._paused > 0

    def left(self) -> float:
        return self._left if self._paused else self._left - (time.monotonic() - self._since)

    async def expired(self) -> None:
        """Returns once the running (unpaused) time is used up."""
        while True:
            self._changed.clear()
            if self._paused:
                await self._changed.wait()
                continue
            left = self.left()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                if not self._paused and self.left() <= 0:
                    return

    async def run(self, work: Awaitable[T], what: str) -> T:
        task = asyncio.ensure_future(work)
        timer = asyncio.ensure_future(self.expired())
        try:
            done, _ = await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                return task.result()
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
            raise CallTimeout(f"{what} did not finish within its timeout of {self.seconds:g}s "
                              "(time spent waiting for answers does not count)")
        finally:
            timer.cancel()
            if not task.done():
                task.cancel()
