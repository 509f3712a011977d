"""In-process fan-out of committed audit records to live subscribers (SSE, waiters of kinds)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mcpx.broker.models import AuditRecord

Filter = Callable[[AuditRecord], bool]


class Subscription:
    def __init__(self, bus: EventBus, accept: Filter, capacity: int) -> None:
        self._bus = bus
        self.accept = accept
        self.queue: asyncio.Queue[AuditRecord | None] = asyncio.Queue(maxsize=capacity)
        self.ended = False  # a None is queued: the next get ends the stream

    async def get(self) -> AuditRecord | None:
        """The next record, or None when the stream is over: this subscriber fell too far behind
        (reconnect with Last-Event-ID), or the daemon is stopping (`ended`); or, not ended, when a
        heartbeat is due (`beat`)."""
        return await self.queue.get()

    def beat(self) -> None:
        """Make the next `get` return None without ending the stream, if nothing is queued: a quiet stream's
        heartbeat is due. (A timer per quiet spell, not a timeout around every `get`: that cost each record a
        timer set and cancelled on its way to the stream.)"""
        if not self.ended and self.queue.empty():
            self.queue.put_nowait(None)

    def end(self) -> None:
        """Make the next `get` return None, dropping the oldest record if the queue is full."""
        if self.ended:
            return
        self.ended = True
        try:
            self.queue.put_nowait(None)
        except asyncio.QueueFull:
            self.queue.get_nowait()
            self.queue.put_nowait(None)

    def close(self) -> None:
        self._bus._subs.discard(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class EventBus:
    def __init__(self) -> None:
        self._subs: set[Subscription] = set()
        self.closed = False

    def subscribe(self, accept: Filter = lambda _r: True, capacity: int = 10000) -> Subscription:
        sub = Subscription(self, accept, capacity)
        self._subs.add(sub)
        if self.closed:
            sub.end()
        return sub

    def close(self) -> None:
        """The daemon is stopping: every subscriber's stream ends now, and any opened later at once."""
        self.closed = True
        for sub in list(self._subs):
            sub.end()

    def publish(self, record: AuditRecord) -> None:
        for sub in list(self._subs):
            if sub.ended or not sub.accept(record):
                continue
            try:
                sub.queue.put_nowait(record)
            except asyncio.QueueFull:
                # a slow reader must not hold the daemon's memory hostage; it resumes from the log
                sub.end()
