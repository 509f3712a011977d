"""The store: the one interface through which everything durable is written and read.

    Store     what the broker asks of a database: units of work, and the reads it serves
    Tx        the statements a unit of work may make, all inside one transaction

SqliteStore (broker/sqlite.py) is the default, one daemon's file; PgStore (broker/postgres.py)
is the database a team's daemons share. Both satisfy these two protocols; the daemon picks one at
start-up (broker/stores.py) and nothing else knows which. Only the broker holds a Store: the gateway, the
surfaces and the routes go through the broker.

A unit of work is a plain function of a Tx. It runs whole, without awaiting, on the store's
own thread; units submitted at the same moment may share one commit (group commit), each in its
own savepoint, so a unit that raises rolls back alone. A unit's future resolves only after its
commit: the broker publishes events, and wakes whoever waits, only then.

Events come from the store, not from the units' callers: the store hands its follower every
committed audit record once, in the order of the log's seq, whoever committed it (a shared
store's other daemons included), so a stream built from them has one order on every daemon.
With them come the rows of the questions they opened or moved, as stored: the broker keeps its
pending questions in memory from these alone, so its listings are in step with the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from mcpx.broker.models import Answer, AuditRecord, Elicitation, Passkey, State, StoredTask, TaskState, made
from mcpx.shared.errors import McpxError

T = TypeVar("T")


@dataclass(frozen=True)
class QuestionFilter:
    """Which questions a read wants; None leaves a column free."""

    state: State | None = None
    session: str | None = None
    server: str | None = None
    audience: str | None = None
    trace: str | None = None
    task: str | None = None


@dataclass(frozen=True)
class AuditFilter:
    """Which audit records a read wants: after a seq, by question, session, trace or task, of some kinds."""

    after: int = 0
    elicit: str | None = None
    session: str | None = None
    trace: str | None = None
    task: str | None = None
    kinds: tuple[str, ...] = ()  # a group ("elicit") or an exact kind ("elicit.open"); none: every kind


class StoreRefused(McpxError):
    """The configured store cannot be used at all (a newer schema, a missing privilege, no driver): the daemon
    does not start; the message says why and what to do."""


@dataclass(frozen=True)
class Identity:
    """A daemon as the team sharing a store knows it. `id` outlives restarts (it is kept in the state directory)."""

    id: str
    user: str
    host: str
    pid: int
    version: str


@dataclass(frozen=True)
class StoreLease:
    """A daemon's lease on a shared store, and whether its heartbeat is within it."""

    id: str
    user: str
    host: str
    pid: int
    version: str
    started: datetime
    heartbeat: datetime
    alive: bool


@dataclass(frozen=True)
class StoreInfo:
    """What `mcpx status` says of the store: its kind, where it is (a DSN without its password), and for a store
    a team shares, this daemon as the team knows it and how long a lease lasts."""

    kind: Literal["sqlite", "postgresql"]
    where: str
    daemon: Identity | None = None
    lease: float | None = None


class QuestionRow(NamedTuple):
    """A question as stored: the columns reads filter on, and its document, passed on without parsing it."""

    id: str
    session: str
    server: str
    audience: str
    state: State
    created: float  # epoch seconds
    expires: float
    trace: str | None
    task: str | None
    doc: str  # the question's document: a JSON object's text, without secondsLeft (that is of the moment)
    # whether named people's approvals decide it (Elicitation.approvals): a column of its own, so that a start finds
    # the approvals' schedules to go on with without reading every pending question's document (SQLite gives 0/1)
    approvals: bool


class TaskRow(NamedTuple):
    """A call task as the tasks table keeps it, its document encoded (documents.task_row): what a call's end
    record holds while it waits for its commit, in place of the model."""

    id: str
    state: TaskState
    session: str
    doc: str


# a call's end nobody waits on (writes.CallEnds): its row (built when written) and its task.done's data, session,
# trace and task id
CallEnd = tuple[Callable[[], TaskRow], dict[str, Any], str, str | None, str]


class TaskDones:
    """The task.done records of a commit's plain calls (writes.CallEnds), as the log's rows take them: each end's
    data, session, trace and task id (`ends`) and its document (`docs`, encoded as `AuditRecord.of` encodes it), all
    at `at`, written by daemon `pid`. The `AuditRecord`s are made of them only if someone is to hear of them: `heard`
    says whether a task.done published now would reach anyone (the event bus's `hears`; None: always made). A store
    whose units run off the loop asks it there, and if nobody would, makes none, and asks again on the loop once
    they committed (`commits.heard_records`): a subscriber that came in between is handed them all the same."""

    __slots__ = ("at", "docs", "ends", "heard", "pid")

    def __init__(self, at: datetime, pid: int, ends: list[CallEnd], docs: list[str],
                 heard: Callable[[str], bool] | None) -> None:
        self.at, self.pid, self.ends, self.docs, self.heard = at, pid, ends, docs, heard

    def wanted(self) -> bool:
        return self.heard is None or self.heard("task.done")

    def values(self) -> list[tuple[Any, ...]]:
        """The audit rows (`sql.AUDIT_INSERT`'s values), in order: `sql.audit_values` of each record."""
        at = self.at.timestamp()
        return [(at, "task.done", None, session, trace, tid, doc)
                for (_row, _data, session, trace, tid), doc in zip(self.ends, self.docs, strict=True)]

    def record(self, i: int) -> AuditRecord:
        """The `i`th record, not numbered yet: `AuditRecord.of`'s, made of the same values."""
        _row, data, session, trace, tid = self.ends[i]
        return made(AuditRecord, {"seq": 0, "at": self.at, "kind": "task.done", "session": session, "trace": trace,
                                  "task": tid, "pid": self.pid, "data": data})

    def records(self, first: int) -> list[AuditRecord]:
        """Every record, numbered as the log holds them from `first` on, with the document each row holds."""
        return [self.record(i).numbered(first + i, doc) for i, doc in enumerate(self.docs)]


# committed audit records, in seq order; True when this store's own units wrote them; the rows of the
# questions they touched, as stored once they had committed (or later: a row never goes back in time)
Follower = Callable[[list[AuditRecord], bool, list[QuestionRow]], None]


class Tx(Protocol):
    """The statements of one unit of work. It runs on the store's thread: nothing in here awaits."""

    def insert_question(self, q: Elicitation) -> None: ...

    def update_question(self, q: Elicitation, expect_state: State = "pending") -> bool:
        """Store `q` over the question of its id if that is still in `expect_state`; False if not."""
        ...

    def question(self, eid: str) -> Elicitation | None: ...

    def insert_answer(self, answer: Answer) -> None: ...

    def answer(self, eid: str) -> Answer | None: ...

    def audit(self, record: AuditRecord) -> AuditRecord:
        """Append `record` to the log; returns it with the seq the log gave it."""
        ...

    def audit_encoded(self, records: Sequence[tuple[AuditRecord, str]]) -> None:
        """Append records whose documents are encoded already (`documents.audit_doc`'s text), in order; each is
        numbered in place with the seq the log gave it."""
        ...

    def audit_dones(self, dones: TaskDones) -> None:
        """Append the task.done records of a commit's plain calls, in order (their records made now, or, on a store
        whose units run off the loop and if nobody is to hear of them, once committed if someone is by then)."""
        ...

    def put_task(self, task: StoredTask | TaskRow) -> None:
        """Keep a call task under its id, over what was kept before."""
        ...

    def put_tasks(self, rows: Sequence[TaskRow], at: float) -> None:
        """Keep these call tasks' rows over what was kept before, `at` as the moment of their update."""
        ...

    def put_fact(self, key: str, value: Any) -> None: ...

    def add_passkey(self, key: Passkey) -> None: ...

    def passkey(self, cid: str) -> Passkey | None: ...

    def use_passkey(self, cid: str, count: int, at: float) -> bool:
        """Record a passkey's use with sign count `count`; False if its count did not grow (a replay or a copy)."""
        ...

    def remove_passkey(self, person: str, cid: str) -> bool: ...

    def claim_task(self, tid: str, owner: str) -> bool:
        """Take over a call task of the daemon `owner`, whose lease lapsed; False if another daemon did first."""
        ...


class Store(Protocol):
    @property
    def info(self) -> StoreInfo: ...

    async def open(self) -> None: ...

    def follow(self, follower: Follower) -> None:
        """Hand `follower` every audit record committed from now on, once each, in seq order, with the rows
        of the questions those records opened or moved."""
        ...

    async def close(self) -> None:
        """Commit what was submitted, then close."""
        ...

    def submit(self, unit: Callable[[Tx], T], within: float = 0.0, waited: bool = True) -> asyncio.Future[T]:
        """Queue a unit now (units commit in the order submitted); its future resolves once committed. With
        `within`, a unit nobody waits on may wait that many seconds for the next commit; `waited` False, one that
        commits at once but that no reply waits on: its batch may commit off the loop (broker/commits.py)."""
        ...

    async def write(self, unit: Callable[[Tx], T]) -> T:
        """Run one unit atomically and durably; what the unit returned (or raised)."""
        ...

    def holds(self, test: Callable[[Callable[[Tx], Any]], bool]) -> bool:
        """Whether a unit `test` picks was submitted and has not yet committed (or failed)."""
        ...

    # reads never wait for a write, and never see half of one

    async def question(self, eid: str) -> tuple[Elicitation, Answer | None] | None: ...

    async def question_rows(self, where: QuestionFilter, limit: int) -> list[QuestionRow]:
        """Questions oldest first."""
        ...

    async def count(self, state: State) -> int: ...

    async def audit(self, where: AuditFilter, limit: int) -> list[AuditRecord]:
        """Records in the order of their seq."""
        ...

    async def last_seq(self) -> int: ...

    async def task(self, tid: str) -> StoredTask | None: ...

    async def tasks_in(self, states: tuple[TaskState, ...]) -> list[StoredTask]:
        """The tasks in these states, least recently updated first."""
        ...

    async def fact(self, key: str) -> Any: ...

    # a store a team shares; a daemon's own store has no other daemons

    async def passkeys(self, person: str | None = None) -> list[Passkey]:
        """Every enrolled passkey (of `person`), by person and age."""
        ...

    async def daemons(self) -> list[StoreLease]:
        """The daemons with a lease on this store, this one first."""
        ...

    async def lapsed_tasks(self, states: tuple[TaskState, ...]) -> list[tuple[StoreLease, StoredTask]]:
        """Tasks in these states of daemons whose lease lapsed, each with that lease."""
        ...
