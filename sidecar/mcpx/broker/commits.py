"""Group commit: the queue in front of a store's writer, shared by every store.

Units submitted at the same moment are handed to the store's `commit` together and share one
commit (on the loop for SQLite, on its writer's thread for PostgreSQL: the store decides), each in
its own savepoint, so a unit that raises rolls back alone (the audit records it wrote with it).
A unit nobody waits on (the record of a call that has ended, behind its result) may wait `within`
seconds for company: it commits with the next unit that cannot wait, or at that horizon,
so a stream of such records costs one commit per horizon, not one each. A batch made only of such
units (its horizon came first) is handed to `commit` as `behind`: nobody waits on it, so the store
commits it off the loop (SQLite on its writer's thread), where its encoding and its system calls
keep no reply waiting. So is a batch whose units commit at once but no reply waits on (`waited` False:
the end of a call that asked, written after its result; with it, the question and the answer that
rode until then: one commit per round trip, off the loop). Units commit in the order submitted,
whether they waited or not.

A unit's future resolves only after the commit, and the batch's committed audit records are handed
on (`committed`) in the same loop turn, just before, so nothing is published that the database does
not hold, and the records' subscribers (an event stream's writer) are woken before the units' callers:
the news of a question leaves before the reply to whoever opened it, with no loop turn spent to
order them. Whatever a caller does once woken (wake an asker, reply) is already scheduled behind them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from mcpx.broker.models import AuditRecord
from mcpx.broker.store import QuestionRow, TaskDones

T = TypeVar("T")
Unit = Callable[[Any], Any]
log = logging.getLogger("mcpx.store")

MAX_WAITING = 512  # units that may wait: this many waiting go at once, whatever their horizon


class RecordingTx(Protocol):
    """A Tx that keeps the audit records and question rows it wrote, in order, so a unit rolled back takes its
    own with it (and the records it left to be made once committed: `later`, see `heard_records`)."""

    records: list[AuditRecord]
    questions: list[QuestionRow]
    later: list[tuple[int, int, TaskDones]]


@dataclass
class Committed:
    """What one batch did: each unit's (ok, value or exception), the audit records it committed, and the
    question rows it wrote (a question written twice: its later row last)."""

    outcomes: list[tuple[bool, Any]]
    records: list[AuditRecord] = field(default_factory=list)
    questions: list[QuestionRow] = field(default_factory=list)
    after: int = 0  # the log's last seq before this batch's records (a shared log: another daemon's, maybe)
    # records written but not made, nobody being there to hear of them as they were: where each run of them belongs
    # among `records`, its first seq, and what they are made of (`heard_records`)
    later: list[tuple[int, int, TaskDones]] = field(default_factory=list)


def heard_records(done: Committed) -> list[AuditRecord]:
    """The batch's records in the log's order, on the loop once it committed: those left to be made (`later`) made
    now, in their place, if someone is to hear of them now (a subscriber that came while they committed), else
    left out, since nothing would take them: the log holds them, and whoever reads it finds them there."""
    if not done.later:
        return done.records
    out: list[AuditRecord] = []
    taken = 0
    for at, first, dones in done.later:
        out += done.records[taken:at]
        taken = at
        if dones.wanted():
            out += dones.records(first)
    out += done.records[taken:]
    return out


def rerun(unit: Callable[[Any], T]) -> Callable[[Any], T]:
    """Mark `unit` as one that may run twice in a batch's transaction (`run_units`): what it does outside the
    transaction (the objects it makes, a document kept on a model, an entry it sets in a dict) comes out the same run
    again after its writes were rolled back. A unit that takes something once (CallEnds' list), or keeps what it
    made across runs (RecordUnit's record) is not one."""
    vars(unit)["rerun"] = True
    return unit


def run_units(tx: RecordingTx, units: list[Unit], execute: Callable[[str], Any]) -> list[tuple[bool, Any]]:
    """Inside the batch's transaction: each unit in its own savepoint. A batch of one unit (a question opened on a
    quiet daemon) needs none: what it raises rolls the batch back whole, which is that unit alone, and reaches its
    future the same way (CommitQueue sets it on every unit of a batch that failed).

    A batch whose units may all run again (`rerun`: a lifecycle's opens and answers) is first run in one savepoint
    for them all: a unit raises only by a bug or a failing database, and a savepoint and its release were ~11 µs a
    unit on the loop (SQLite's own work), more than the rest of a commit's statements. If one raises, that savepoint
    is rolled back and the batch runs again unit by unit, the one that raised rolled back alone."""
    if len(units) == 1:
        return [(True, units[0](tx))]
    if all(getattr(unit, "rerun", False) for unit in units):
        mark, rows, later = len(tx.records), len(tx.questions), len(tx.later)
        execute("SAVEPOINT batch")
        try:
            done = [(True, unit(tx)) for unit in units]
        except Exception:
            execute("ROLLBACK TO SAVEPOINT batch")
            del tx.records[mark:]
            del tx.questions[rows:]
            del tx.later[later:]
        else:
            execute("RELEASE SAVEPOINT batch")
            return done
        execute("RELEASE SAVEPOINT batch")
    out: list[tuple[bool, Any]] = []
    for unit in units:
        mark, rows, later = len(tx.records), len(tx.questions), len(tx.later)
        execute("SAVEPOINT unit")
        try:
            out.append((True, unit(tx)))
        except Exception as exc:
            execute("ROLLBACK TO SAVEPOINT unit")
            del tx.records[mark:]
            del tx.questions[rows:]
            del tx.later[later:]
            out.append((False, exc))
        execute("RELEASE SAVEPOINT unit")
    return out


def _log_failure(fut: asyncio.Future[Any]) -> None:
    """A unit that raised is a bug (refusals are returned, not raised): say so even if nobody awaited it."""
    if not fut.cancelled() and fut.exception() is not None:
        log.error("a write to the store failed: %r", fut.exception())


class CommitQueue:
    """Units queued on the event loop, committed a batch per call of the store's `commit` (one at a time)."""

    def __init__(self, commit: Callable[[list[Unit], bool], Awaitable[Committed]],
                 committed: Callable[[Committed], None]) -> None:
        self._commit = commit
        self._committed = committed
        self._queue: list[tuple[Unit, asyncio.Future[Any]]] = []
        self._committing: list[Unit] = []  # the batch being committed (on the store's thread, it may take a while)
        self._flusher: asyncio.Task[None] | None = None
        self._due = False  # the queue holds a unit that cannot wait (or whose horizon came)
        self._urgent = False  # the queue holds a unit that cannot wait: its batch commits where it is quickest
        self._horizon: asyncio.TimerHandle | None = None

    def submit(self, unit: Callable[[Any], T], within: float = 0.0, waited: bool = True) -> asyncio.Future[T]:
        """Queue `unit`; it commits at once with whatever is queued, or, with `within`, at the latest that many
        seconds from now (with the first unit that cannot wait, if one comes sooner). `waited` False: it commits at
        once all the same, but nobody's reply waits on it (a call's end, written after its result): unless a unit
        that is waited on joins its batch, the batch is `behind`, and the store commits it off the loop."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_log_failure)
        self._queue.append((unit, fut))
        if within <= 0:
            self._urgent = self._urgent or waited
            self._go()
        elif len(self._queue) >= MAX_WAITING:
            self._go()
        elif self._horizon is None:  # cancelled only by _go, which has the flusher take what is queued
            self._horizon = asyncio.get_running_loop().call_later(within, self._go)
        return fut

    def holds(self, test: Callable[[Unit], bool]) -> bool:
        """Whether a unit `test` picks is queued, or in the batch being committed (a unit whose future was
        cancelled is still written: only the queue knows it is not yet)."""
        return any(test(u) for u, _ in self._queue) or any(test(u) for u in self._committing)

    def _go(self) -> None:
        """Commit what is queued now (the flusher takes it, or takes it next if it is committing a batch)."""
        if self._horizon is not None:
            self._horizon.cancel()
            self._horizon = None
        self._due = True
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())

    async def drain(self) -> None:
        """Wait until what was submitted is committed (or has failed), those that could wait included."""
        while self._queue or (self._flusher is not None and not self._flusher.done()):
            if self._queue:
                self._go()
            assert self._flusher is not None
            await self._flusher

    async def _flush(self) -> None:
        while self._queue and self._due:
            batch, self._queue, self._due = self._queue, [], False
            behind, self._urgent = not self._urgent, False
            self._committing = [u for u, _ in batch]
            try:
                done = await self._commit(self._committing, behind)
            except BaseException as exc:  # the commit itself failed: nothing in the batch happened
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
                if not isinstance(exc, Exception):
                    raise
                continue
            finally:
                self._committing = []
            if done.records or done.later:
                try:
                    self._committed(done)
                except Exception:  # a follower's fault is logged; the units' callers are told all the same
                    log.exception("handing on committed records failed")
            for (_, fut), (ok, value) in zip(batch, done.outcomes, strict=True):
                if fut.done():
                    continue
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
