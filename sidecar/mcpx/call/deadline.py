"""A call's own timeout that stands still while a question waits for an answer.

A person taking four minutes to answer must not kill the call; a server that simply hangs must.
Built on asyncio.timeout, rescheduled on pause and resume, so it costs no task of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from mcpx.shared.errors import McpxError

T = TypeVar("T")


class CallTimeout(McpxError):
    pass


class PausableDeadline:
    def __init__(self, seconds: float, since: float | None = None) -> None:
        """`since`: loop time its clock began running, for work begun before it was made (a plain call's lean path
        sends its request before its deadline is made, if it ever is: call/lean.py); `run(begun=True)` counts from
        there."""
        self.seconds = seconds
        self._left = seconds
        self._since: float | None = since  # loop time the clock last started running
        self._paused = 0
        self._timeout: asyncio.Timeout | None = None

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def left(self) -> float:
        if self._paused or self._since is None:
            return self._left
        return self._left - (self._now() - self._since)

    def pause(self) -> None:
        if self._paused == 0:
            self._left = self.left()
            if self._timeout is not None:
                self._timeout.reschedule(None)
        self._paused += 1

    def resume(self) -> None:
        self._paused = max(0, self._paused - 1)
        if self._paused == 0:
            self._since = self._now()
            if self._timeout is not None:
                self._timeout.reschedule(self._since + max(0.0, self._left))

    async def run(self, work: Awaitable[T], what: str, begun: bool = False) -> T:
        """`work` within the deadline, its clock running from now, or, `begun`, from its `since` (and pauses since)."""
        since = self._since if begun and self._since is not None else self._now()
        self._since = since
        when = None if self._paused else since + self._left
        try:
            async with asyncio.timeout_at(when) as self._timeout:
                return await work
        except TimeoutError:
            if self._timeout is None or not self._timeout.expired():
                raise  # a timeout inside the work itself, not ours
            raise CallTimeout(f"{what} did not finish within its timeout of {self.seconds:g}s "
                              "(time spent waiting for answers does not count)") from None
        finally:
            self._timeout = None
