"""SqliteStore: mcpx.db, SQLite in WAL mode, the store behind the broker (broker/store.py).

One writer connection and one reader connection, each on a thread of its own: a unit of work,
or a whole batch of them, crosses to the writer's thread once. Every unit runs whole on that
thread, so concurrent coroutines never interleave half-written state, and a unit's future
resolves only after the commit, so nothing is published that the database does not hold.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from mcpx.broker.commits import CommitQueue, Committed, Unit, run_units
from mcpx.broker.models import StoredTask, TaskState
from mcpx.broker.sql import SqlReads, SqlTx
from mcpx.broker.store import Follower, Lease, StoreInfo, Tx

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS elicitations (
    id       TEXT PRIMARY KEY,
    session  TEXT NOT NULL,
    server   TEXT NOT NULL,
    audience TEXT NOT NULL,
    state    TEXT NOT NULL,
    created  REAL NOT NULL,
    expires  REAL NOT NULL,
    trace    TEXT,
    task     TEXT,
    doc      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS elicitations_state ON elicitations(state, created);
CREATE INDEX IF NOT EXISTS elicitations_session ON elicitations(session, state, created);
CREATE INDEX IF NOT EXISTS elicitations_trace ON elicitations(trace);
CREATE TABLE IF NOT EXISTS answers (
    id  TEXT PRIMARY KEY REFERENCES elicitations(id),
    doc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    at      REAL NOT NULL,
    kind    TEXT NOT NULL,
    elicit  TEXT,
    session TEXT,
    trace   TEXT,
    task    TEXT,
    doc     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_elicit ON audit(elicit);
CREATE INDEX IF NOT EXISTS audit_session ON audit(session, seq);
CREATE INDEX IF NOT EXISTS audit_trace ON audit(trace);
CREATE TABLE IF NOT EXISTS tasks (
    id      TEXT PRIMARY KEY,
    state   TEXT NOT NULL,
    session TEXT,
    updated REAL NOT NULL,
    doc     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks(state);
CREATE TABLE IF NOT EXISTS facts (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    at    REAL NOT NULL
);
"""


class SqliteTx(SqlTx):
    """The statements of one unit of work, on the writer's thread."""

    def claim_task(self, tid: str, owner: str) -> bool:
        return False  # one daemon's own file: no task of it has another owner


class SqliteStore(SqlReads):
    """mcpx.db, opened once per daemon: one writer connection, one reader connection, a thread each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # a connection lives on the one thread that opened it: each executor is that thread
        self._writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcpx-db-write")
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcpx-db-read")
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._commits = CommitQueue(self._writes, self._run_batch, self._committed)
        self._follower: Follower | None = None

    @property
    def info(self) -> StoreInfo:
        return StoreInfo(kind="sqlite", where=str(self.path))

    def follow(self, follower: Follower) -> None:
        self._follower = follower

    def _committed(self, done: Committed) -> None:
        # one writer, in this process alone: the order of its commits is the log's order
        if self._follower is not None:
            self._follower(done.records, True, done.questions)

    def _private_files(self) -> None:
        """mcpx.db, mcpx.db-wal and mcpx.db-shm are the owner's alone (0600), and never briefly wider.

        SQLite creates the -wal and -shm files with the database file's own mode, so the database is
        created 0600 before SQLite first opens it (an empty file is an empty database), without
        touching the process's umask; files an older mcpx left wider are narrowed.
        """
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        for path in (self.path, *(self.path.with_name(self.path.name + end) for end in ("-wal", "-shm"))):
            try:
                if path.stat().st_mode & 0o077:
                    path.chmod(0o600)
            except FileNotFoundError:
                pass

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._private_files()
        loop = asyncio.get_running_loop()
        self._writer = await loop.run_in_executor(self._writes, self._open_writer)
        self._reader = await loop.run_in_executor(self._reads, self._open_reader)

    def _open_writer(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives the process being killed
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(SCHEMA)
        return db

    def _open_reader(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA query_only=1")
        return db

    async def close(self) -> None:
        await self._commits.drain()  # what was promised is committed before the store closes
        loop = asyncio.get_running_loop()
        for executor, conn in ((self._reads, self._reader), (self._writes, self._writer)):
            if conn is not None:
                await loop.run_in_executor(executor, conn.close)
            executor.shutdown(wait=False)  # its thread is idle now, and ends at once
        self._reader = self._writer = None

    async def write(self, unit: Callable[[Tx], T]) -> T:
        return await self.submit(unit)

    def submit(self, unit: Callable[[Tx], T], within: float = 0.0) -> asyncio.Future[T]:
        """Queue a unit; units waiting at the same moment are committed together (group commit)."""
        assert self._writer is not None, "store is not open"
        return self._commits.submit(unit, within)

    def _run_batch(self, units: list[Unit]) -> Committed:
        """On the writer's thread: each unit in its own savepoint, one commit for them all."""
        db = self._writer
        assert db is not None
        tx = SqliteTx(db)
        db.execute("BEGIN IMMEDIATE")
        try:
            out = run_units(tx, units, db.execute)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return Committed(out, tx.records, tx.questions)

    # ---- reads (the reader connection never blocks the writer in WAL mode)

    async def _read(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """One read, whole, in one crossing to the reader's thread: it never shares a half-read snapshot."""
        reader = self._reader
        assert reader is not None, "store is not open"
        return await asyncio.get_running_loop().run_in_executor(self._reads, read, reader)

    async def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await self._read(lambda db: db.execute(sql, args).fetchall())

    async def tasks_in(self, states: tuple[TaskState, ...]) -> list[StoredTask]:
        marks = ",".join("?" for _ in states)
        rows = await self._rows(f"SELECT doc FROM tasks WHERE state IN ({marks}) ORDER BY updated", states)
        return [StoredTask.model_validate_json(r[0]) for r in rows]

    async def daemons(self) -> list[Lease]:
        return []  # this daemon's own file

    async def lapsed_tasks(self, states: tuple[TaskState, ...]) -> list[tuple[Lease, StoredTask]]:
        return []
