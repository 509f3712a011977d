"""A store a team of daemons shares (PostgreSQL): what this daemon does about the others' doings.

Another daemon's committed records reach this one through the store (`heard`): a question it opened gets a
deadline on this daemon's sweeper and a future its long polls can wait on; one it answered or expired wakes
those waiters with the stored answer (`settle`); one it abandoned ends them. A daemon whose lease lapsed has
its calls taken over: their questions abandoned and the task failed, by exactly one daemon of the team.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

from mcpx.broker.models import AuditRecord, StoredTask, TaskState
from mcpx.broker.store import Store, StoreLease
from mcpx.broker.sweeper import Sweeper
from mcpx.broker.waiters import Waiters
from mcpx.broker.writes import Writes

log = logging.getLogger("mcpx.broker")


class Team:
    """`background(work, name)`: run work of the broker's own that nobody awaits (cancelled at the broker's stop)."""

    def __init__(self, store: Store, writes: Writes, waiters: Waiters, sweeper: Sweeper,
                 background: Callable[[Coroutine[Any, Any, Any], str], None]) -> None:
        self._store = store
        self._writes = writes
        self._waiters = waiters
        self._sweeper = sweeper
        self._background = background

    def heard(self, record: AuditRecord) -> None:
        """Another daemon opened, answered or ended a question: what this daemon does about it."""
        eid = record.elicit
        if eid is None:
            return
        if record.kind == "elicit.open" and "expiresAt" in record.data:
            self._waiters.future_for(eid)
            self._sweeper.due(datetime.fromisoformat(record.data["expiresAt"]).timestamp(), eid)
        elif record.kind in ("elicit.answered", "elicit.expired") and eid in self._waiters:
            self._background(self.settle(eid), f"mcpx-settle-{eid}")
        elif record.kind == "elicit.abandoned":
            self._waiters.end(eid, str(record.data.get("reason") or ""))

    async def settle(self, eid: str) -> None:
        """Wake this daemon's asker or waiter with an answer another daemon committed (as stored: redacted)."""
        try:
            found = await self._store.question(eid)
        except Exception:
            log.exception("reading %s's answer from the store failed", eid)
            return
        if found is not None and found[1] is not None:
            self._waiters.wake(eid, found[1])

    async def take_over(self, task: StoredTask, owner: str, reason: str, pending: list[str]) -> list[str]:
        """End a call of a daemon whose lease lapsed: its `pending` questions abandoned with `reason`, the task
        failed with its task.done, in one transaction that only one daemon of the team gets to commit.
        The questions abandoned; [] when another daemon took it over first."""
        gone = await self._writes.write(pending, self._writes.taking_over(task, owner, reason, pending, time.time()))
        for eid in gone or []:
            self._waiters.end(eid, reason)
        return gone or []

    async def lapsed_tasks(self, states: tuple[TaskState, ...]) -> list[tuple[StoreLease, StoredTask]]:
        return await self._store.lapsed_tasks(states)

    async def daemons(self) -> list[StoreLease]:
        return await self._store.daemons()
