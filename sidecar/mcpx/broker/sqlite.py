"""SqliteStore: mcpx.db, SQLite in WAL mode, the store behind the broker (broker/store.py).

A batch that someone waits on (a question opened, an answer given) commits on the event loop itself,
whole, without awaiting, so concurrent coroutines never interleave half-written state, and a unit's
future resolves only after the commit, so nothing is published that the database does not hold. In
WAL mode with synchronous=NORMAL a commit is a write() of a few pages into the -wal file, far shorter
than handing it to a thread and back (two thread wake-ups), and the units are Python, which holds the
GIL wherever it runs. A batch nobody waits on (`behind`: the records of calls that ended, answers
already delivered) commits on the store's own thread: its encoding and its dozens of system calls
(pwrite64, fcntl locks, getpid) would otherwise hold up whatever reply the loop has to write next.
What may take long stays off the loop too: the checkpoints (they fsync), made through a connection
of their own, and a batch that finds the database locked by another process (busy_timeout's wait).
Either way one batch commits at a time (the commit queue awaits each), so the writer connection is
never used by two threads at once.
Reads have a connection and a thread of their own too: in WAL mode they never block the writer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from mcpx.broker.commits import CommitQueue, Committed, Unit, heard_records, run_units
from mcpx.broker.models import StoredTask, TaskState
from mcpx.broker.sql import AUDIT_INSERT, SqlReads, SqlTx
from mcpx.broker.store import Follower, StoreInfo, StoreLease, StoreRefused, TaskDones, Tx
from mcpx.broker.store_thread import StoreThread
from mcpx.shared.errors import McpxError

T = TypeVar("T")
log = logging.getLogger("mcpx.store")

# the schema's version, in the database's PRAGMA user_version: a store made before mcpx kept one reads 0, and has
# version 1's tables (which is why version 1 creates only what is missing)
SCHEMA_VERSION = 3
# each version's statements, applied in order to bring a database from the one before
MIGRATIONS: dict[int, str] = {
    1: """
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
""",
    # whether named people's approvals decide a question, as a column (QuestionRow.approvals): a start finds the
    # approvals' schedules by it. The rows an older mcpx wrote say it in their document
    2: """
ALTER TABLE elicitations ADD COLUMN approvals INTEGER NOT NULL DEFAULT 0;
UPDATE elicitations SET approvals = 1 WHERE doc LIKE '%"approvals":{%' AND json_type(doc, '$.approvals') = 'object';
""",
    # people's passkeys (docs/presence.md), with their sign counts
    3: """
CREATE TABLE IF NOT EXISTS passkeys (
    id         TEXT PRIMARY KEY,
    person     TEXT NOT NULL,
    public_key TEXT NOT NULL,
    sign_count INTEGER NOT NULL,
    created    REAL NOT NULL,
    last_used  REAL
);
""",
}


# sqlite3 binds an int, a float, a str as they are, and hands any other value (None, a bool) to its adapters first:
# with none registered for its type, it asks its protocol for __adapt__, and that miss builds an AttributeError's
# message each time (a question's row and each audit record bind a few: ~3,300 instructions each under callgrind, 8 a
# lifecycle). Registered, the look-up finds these at once, C callables binding what sqlite3 bound before: None as
# NULL, a bool as its integer. The registry is the process's; mcpx's own SQLite connections are all there is in it.
sqlite3.register_adapter(type(None), cast("Callable[[None], None]", {}.get))  # an empty dict's get: None
sqlite3.register_adapter(bool, int)


# units committed between two checkpoints: a few pages each, so the -wal file stays around SQLite's own default
# (1000 pages) before it is copied into the database and begins again
CHECKPOINT_EVERY = 200


class Busy(McpxError):
    """The database is locked by another process: the batch goes to the store's thread to wait for it."""


class SqliteTx(SqlTx):
    """The statements of one unit of work, in the batch's transaction (on the loop, or the store's thread)."""

    def claim_task(self, tid: str, owner: str) -> bool:
        return False  # one daemon's own file: no task of it has another owner

    def audit_dones(self, dones: TaskDones) -> None:
        """Every record in one statement. AUTOINCREMENT gives each row the seq after the last one, and nothing else
        writes while this transaction holds the file's write lock: the rows are numbered in turn, up to the last one
        inserted. Their `AuditRecord`s are made here only if someone is to hear of them now; if nobody is, they are
        left to be made on the loop once committed, and only if someone is by then (`commits.heard_records`): a plain
        call's task.done that nobody follows costs its row, not a model, and no publishing."""
        values = dones.values()
        if len(values) == 1:
            last = self._db.execute(AUDIT_INSERT, values[0]).lastrowid
        else:
            self._db.executemany(AUDIT_INSERT, values)
            last = self._db.execute("SELECT last_insert_rowid()").fetchone()[0]
        first = int(last) - len(values) + 1
        if dones.wanted():
            self.records.extend(dones.records(first))
        else:
            self.later.append((len(self.records), first, dones))


def _log_checkpoint(fut: asyncio.Future[None]) -> None:
    """A failed checkpoint loses nothing (the pages stay in the -wal file, the next one copies them): say so."""
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("checkpointing mcpx.db failed (the next one retries): %r", fut.exception())


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Create mcpx.db's tables, or bring them to this mcpx's version; refuse a newer one. In one write transaction:
    a second process opening the file at the same moment waits for it (busy_timeout), then finds it done."""
    db.execute("BEGIN IMMEDIATE")
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        existing = db.execute("SELECT 1 FROM sqlite_master WHERE name='elicitations'").fetchone() is not None
        if version > SCHEMA_VERSION:
            raise StoreRefused(f"{path} holds mcpx schema version {version}, newer than this mcpx understands "
                               f"({SCHEMA_VERSION}): upgrade mcpx here (pip install -U mcpx); nothing was read or "
                               "written")
        for step in range(version + 1, SCHEMA_VERSION + 1):
            # one statement at a time: executescript would commit the transaction first
            for statement in filter(str.strip, MIGRATIONS[step].split(";")):
                db.execute(statement)
            if existing:  # a new file is made, not migrated: nothing to say
                log.info("store %s: schema migrated to version %d", path, step)
        if version < SCHEMA_VERSION:
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class SqliteStore(SqlReads):
    """mcpx.db, opened once per daemon: one writer connection, one reader connection, a thread each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # the writer commits on the loop, and on this thread when nobody waits on the batch or it must wait for a
        # lock (never both at once: the commit queue runs one batch at a time); the checkpointer's connection
        # lives on this thread
        self._writes = StoreThread("mcpx-db-write")
        self._reads = StoreThread("mcpx-db-read")
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._checkpointer: sqlite3.Connection | None = None
        self._commits = CommitQueue(self._commit, self._committed)
        self._follower: Follower | None = None
        self._unsaved = 0  # units committed since the last checkpoint began
        self._checkpoint: asyncio.Future[None] | None = None

    @property
    def info(self) -> StoreInfo:
        return StoreInfo(kind="sqlite", where=str(self.path))

    def follow(self, follower: Follower) -> None:
        self._follower = follower

    def _committed(self, done: Committed) -> None:
        # one writer, in this process alone: the order of its commits is the log's order
        records = heard_records(done)
        if self._follower is not None and records:
            self._follower(records, True, done.questions)

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
        self._writer = await self._writes.run(self._open_writer)
        self._checkpointer = await self._writes.run(self._open_checkpointer)
        self._reader = await self._reads.run(self._open_reader)

    def _open_writer(self) -> sqlite3.Connection:
        # used on the loop and, when it must wait, on the store's thread: one at a time (check_same_thread off)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout=5000")  # the schema's first write may wait for another process
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives the process being killed
        db.execute("PRAGMA synchronous=NORMAL")
        # a savepoint's sub-journal (the pages a batch's savepoint may have to restore) in memory: past 64 KiB SQLite
        # spills it to a temporary file, opened, written and unlinked within the commit (a batch of opens and answers
        # in one savepoint, commits.run_units, did so every few commits: ~20% more system time a lifecycle)
        db.execute("PRAGMA temp_store=MEMORY")
        migrate(db, self.path)
        # on the loop a lock held elsewhere is not waited for (Busy: the batch waits on the store's thread),
        # and no commit checkpoints (the checkpointer does, on that thread)
        db.execute("PRAGMA busy_timeout=0")
        db.execute("PRAGMA wal_autocheckpoint=0")
        return db

    def _open_checkpointer(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _open_reader(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA query_only=1")
        return db

    async def close(self) -> None:
        await self._commits.drain()  # what was promised is committed before the store closes
        if self._checkpoint is not None:
            await asyncio.wait({self._checkpoint})  # its own outcome was logged
        for thread, conn in ((self._reads, self._reader), (self._writes, self._checkpointer),
                             (self._writes, self._writer)):
            if conn is not None:
                await thread.run(conn.close)  # the last to close checkpoints what is left
        for thread in (self._reads, self._writes):
            thread.shutdown()  # idle now: it ends at once
        self._reader = self._writer = self._checkpointer = None

    async def write(self, unit: Callable[[Tx], T]) -> T:
        return await self.submit(unit)

    def submit(self, unit: Callable[[Tx], T], within: float = 0.0, waited: bool = True) -> asyncio.Future[T]:
        """Queue a unit; units waiting at the same moment are committed together (group commit)."""
        assert self._writer is not None, "store is not open"
        return self._commits.submit(unit, within, waited)

    def holds(self, test: Callable[[Unit], bool]) -> bool:
        return self._commits.holds(test)

    async def _commit(self, units: list[Unit], behind: bool = False) -> Committed:
        """A batch, committed on the loop; on the store's thread if nobody waits on it (`behind`), or if another
        process holds the database's lock."""
        if behind:
            done = await self._writes.run(self._run_behind, units)
        else:
            try:
                done = self._run_batch(units)
            except Busy:
                done = await self._writes.run(self._run_batch, units, 5.0)
        # a unit that writes the ends of many calls (writes.CallEnds) counts as that many
        self._unsaved += sum(getattr(unit, "weight", 1) for unit in units)
        if self._unsaved >= CHECKPOINT_EVERY and (self._checkpoint is None or self._checkpoint.done()):
            self._unsaved = 0
            self._checkpoint = self._writes.run(self._run_checkpoint)
            self._checkpoint.add_done_callback(_log_checkpoint)
        return done

    def _run_behind(self, units: list[Unit]) -> Committed:
        """On the store's thread: a batch nobody waits on, waiting for another process's lock only if it must."""
        try:
            return self._run_batch(units)
        except Busy:
            return self._run_batch(units, 5.0)

    def _run_batch(self, units: list[Unit], patience: float = 0.0) -> Committed:
        """Each unit in its own savepoint, one commit for them all. `patience`: how long to wait for a lock
        another process holds (on the store's thread only); without it, Busy before anything is written."""
        db = self._writer
        assert db is not None
        if patience:
            db.execute(f"PRAGMA busy_timeout={int(patience * 1000)}")
        try:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if patience or exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                raise Busy() from exc
            tx = SqliteTx(db)
            try:
                out = run_units(tx, units, db.execute)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            if patience:
                db.execute("PRAGMA busy_timeout=0")
        return Committed(out, tx.records, tx.questions, later=tx.later)

    def _run_checkpoint(self) -> None:
        """On the store's thread: copy the -wal file's committed pages into the database (they fsync),
        beside the writer, which goes on committing; the -wal file starts over from its beginning once all
        are copied. PASSIVE: it waits for nobody."""
        assert self._checkpointer is not None
        self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    # ---- reads (the reader connection never blocks the writer in WAL mode)

    async def _read(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """One read, whole, in one crossing to the reader's thread: it never shares a half-read snapshot."""
        reader = self._reader
        assert reader is not None, "store is not open"
        return await self._reads.run(read, reader)

    async def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await self._read(lambda db: db.execute(sql, args).fetchall())

    async def tasks_in(self, states: tuple[TaskState, ...]) -> list[StoredTask]:
        marks = ",".join("?" for _ in states)
        rows = await self._rows(f"SELECT doc FROM tasks WHERE state IN ({marks}) ORDER BY updated", states)
        return [StoredTask.model_validate_json(r[0]) for r in rows]

    async def daemons(self) -> list[StoreLease]:
        return []  # this daemon's own file

    async def lapsed_tasks(self, states: tuple[TaskState, ...]) -> list[tuple[StoreLease, StoredTask]]:
        return []
