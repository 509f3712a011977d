"""In-process fan-out of committed audit records to live subscribers (SSE, waiters of kinds)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mcpx.broker.models import AuditRecord

Filter = Callable[[AuditRecord], bool]


class Subscription:
    def __init__(self, bus: EventBus, accept: Filter | None, capacity: int, kinds: frozenset[str] | None) -> None:
        self._bus = bus
        self.accept = accept
        self.kinds = kinds  # the only kinds it takes, if it says (EventBus.hears); None: any `accept` takes
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
        self._bus._leave(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class EventBus:
    def __init__(self) -> None:
        self._subs: set[Subscription] = set()
        self.closed = False
        # what the subscribers take, for `hears`: how many take any kind their `accept` takes (they said no kinds),
        # and the kinds the others said. Rebuilt on the loop as they come and go; read whole from any thread
        self._any = 0
        self._kinds: frozenset[str] = frozenset()

    def subscribe(self, accept: Filter | None = None, capacity: int = 10000,
                  kinds: frozenset[str] | None = None) -> Subscription:
        """Records `accept` takes (None: every one), of `kinds` only if it says (then `accept` is asked of those
        alone)."""
        sub = Subscription(self, accept, capacity, kinds)
        self._subs.add(sub)
        self._heard()
        if self.closed:
            sub.end()
        return sub

    def _leave(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.discard(sub)
            self._heard()

    def _heard(self) -> None:
        kinds = [s.kinds for s in self._subs if s.kinds is not None]
        self._kinds = frozenset().union(*kinds)
        self._any = len(self._subs) - len(kinds)

    def hears(self, kind: str) -> bool:
        """Whether a record of `kind` published now might reach a subscriber (one that says no kinds might take any).
        Asked from the store's thread too (store.TaskDones): two reads of values the loop replaces whole, so at
        worst an answer of a moment ago, which the loop asks again before it publishes."""
        return self._any > 0 or kind in self._kinds

    def close(self) -> None:
        """The daemon is stopping: every subscriber's stream ends now, and any opened later at once."""
        self.closed = True
        for sub in list(self._subs):
            sub.end()

    def publish(self, record: AuditRecord) -> None:
        for sub in list(self._subs):
            if sub.ended or (sub.kinds is not None and record.kind not in sub.kinds) or (
                    sub.accept is not None and not sub.accept(record)):
                continue
            try:
                sub.queue.put_nowait(record)
            except asyncio.QueueFull:
                # a slow reader must not hold the daemon's memory hostage; it resumes from the log
                sub.end()
