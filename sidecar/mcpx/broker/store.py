"""The one writer of mcpx.db: questions, answers, the audit log, tasks (SQLite in WAL mode).

Every unit of work is one transaction run whole on the database thread, so concurrent
coroutines never interleave half-written state; events are published by the caller only
after the unit has committed, so no subscriber sees what the database does not hold.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from mcpx import wirejson

T = TypeVar("T")
log = logging.getLogger("mcpx.store")

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


def _log_failure(fut: "asyncio.Future[Any]") -> None:
    """A unit that raised is a bug (refusals are returned, not raised): say so even if nobody awaited it."""
    if not fut.cancelled() and fut.exception() is not None:
        log.error("a write to mcpx.db failed: %r", fut.exception())


def _dumps(value: Any) -> str:
    # never a UnicodeEncodeError at commit: a lone surrogate (in a tool's result, say) is kept as its escape
    return wirejson.dumps(value)


class Tx:
    """The statements of one unit of work. It runs on the database thread: no awaiting in here."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def insert_elicitation(self, row: dict[str, Any], doc: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO elicitations (id, session, server, audience, state, created, expires, trace, task, doc)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (row["id"], row["session"], row["server"], row["audience"], row["state"], row["created"],
             row["expires"], row.get("trace"), row.get("task"), _dumps(doc)),
        )

    def update_elicitation(self, eid: str, state: str, audience: str, doc: dict[str, Any],
                           expect_state: str = "pending") -> bool:
        """Move a question on, only if it is still in `expect_state`; False when someone else got there first."""
        cur = self._db.execute(
            "UPDATE elicitations SET state=?, audience=?, doc=? WHERE id=? AND state=?",
            (state, audience, _dumps(doc), eid, expect_state),
        )
        return cur.rowcount == 1

    def elicitation(self, eid: str) -> tuple[dict[str, Any], float] | None:
        row = self._db.execute("SELECT doc, expires FROM elicitations WHERE id=?", (eid,)).fetchone()
        return (json.loads(row[0]), row[1]) if row else None

    def insert_answer(self, eid: str, doc: dict[str, Any]) -> None:
        self._db.execute("INSERT INTO answers (id, doc) VALUES (?,?)", (eid, _dumps(doc)))

    def answer(self, eid: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT doc FROM answers WHERE id=?", (eid,)).fetchone()
        return json.loads(row[0]) if row else None

    def audit(self, at: float, kind: str, doc: dict[str, Any]) -> int:
        cur = self._db.execute(
            "INSERT INTO audit (at, kind, elicit, session, trace, task, doc) VALUES (?,?,?,?,?,?,?)",
            (at, kind, doc.get("elicit"), doc.get("session"), doc.get("trace"), doc.get("task"), _dumps(doc)),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def put_task(self, tid: str, state: str, session: str | None, doc: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO tasks (id, state, session, updated, doc) VALUES (?,?,?,?,?)"
            " ON CONFLICT(id) DO UPDATE SET state=excluded.state, updated=excluded.updated, doc=excluded.doc",
            (tid, state, session, time.time(), _dumps(doc)),
        )

    def put_fact(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT INTO facts (key, value, at) VALUES (?,?,?)"
            " ON CONFLICT(key) DO UPDATE SET value=excluded.value, at=excluded.at",
            (key, _dumps(value), time.time()),
        )


class Store:
    """mcpx.db, opened once per daemon: one writer connection, one reader connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._queue: list[tuple[Callable[[Tx], Any], asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None

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
        self._writer = await aiosqlite.connect(self.path, isolation_level=None)
        await self._writer.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives the process being killed
        await self._writer.execute("PRAGMA synchronous=NORMAL")
        await self._writer.execute("PRAGMA busy_timeout=5000")
        await self._writer.executescript(SCHEMA)
        self._reader = await aiosqlite.connect(self.path, isolation_level=None)
        await self._reader.execute("PRAGMA busy_timeout=5000")
        await self._reader.execute("PRAGMA query_only=1")

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            await self._flusher  # what was promised is committed before the store closes
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    async def write(self, unit: Callable[[Tx], T]) -> T:
        """Run one unit of work atomically and durably; returns what the unit returned.

        Units waiting at the same moment are committed together (group commit): each runs in its
        own savepoint, so one that fails rolls back alone, and none is reported done before the
        shared commit. aiosqlite runs every call on its connection's own thread; `_execute` is how
        its public methods get there, and using it here makes a whole batch a single hand-off
        (each hand-off costs ~0.1 ms; a question's life has dozens of statements). One thread and
        one queue mean two units never interleave.
        """
        return await self.submit(unit)

    def submit(self, unit: Callable[[Tx], T]) -> "asyncio.Future[T]":
        """Queue a unit now (units commit in the order submitted); await the future for its outcome, or not."""
        assert self._writer is not None, "store is not open"
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_log_failure)
        self._queue.append((unit, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return fut

    async def _flush(self) -> None:
        assert self._writer is not None
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                outcomes = await self._writer._execute(self._run_batch, [u for u, _ in batch])
            except BaseException as exc:  # the commit itself failed: nothing in the batch happened
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, fut), (ok, value) in zip(batch, outcomes):
                if fut.done():
                    continue
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)

    def _run_batch(self, units: list[Callable[[Tx], Any]]) -> list[tuple[bool, Any]]:
        assert self._writer is not None
        conn: sqlite3.Connection = self._writer._conn
        tx = Tx(conn)
        out: list[tuple[bool, Any]] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for unit in units:
                conn.execute("SAVEPOINT unit")
                try:
                    out.append((True, unit(tx)))
                except Exception as exc:
                    conn.execute("ROLLBACK TO unit")
                    out.append((False, exc))
                conn.execute("RELEASE unit")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return out

    # ---- reads (the reader connection never blocks the writer in WAL mode)

    async def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One read, in one trip: a query never shares the reader with another half-read one (stale snapshots)."""
        assert self._reader is not None, "store is not open"
        return [tuple(r) for r in await self._reader.execute_fetchall(sql, args)]

    async def elicitation(self, eid: str) -> tuple[dict[str, Any], float] | None:
        rows = await self._rows("SELECT doc, expires FROM elicitations WHERE id=?", (eid,))
        return (json.loads(rows[0][0]), rows[0][1]) if rows else None

    async def answer(self, eid: str) -> dict[str, Any] | None:
        rows = await self._rows("SELECT doc FROM answers WHERE id=?", (eid,))
        return json.loads(rows[0][0]) if rows else None

    async def elicitation_and_answer(self, eid: str) -> tuple[dict[str, Any], float, dict[str, Any] | None] | None:
        rows = await self._rows("SELECT e.doc, e.expires, a.doc FROM elicitations e LEFT JOIN answers a ON a.id = e.id"
                                " WHERE e.id=?", (eid,))
        if not rows:
            return None
        doc, expires, answer = rows[0]
        return json.loads(doc), expires, (json.loads(answer) if answer else None)

    @staticmethod
    def _filters(filters: dict[str, str | None]) -> tuple[str, list[Any]]:
        clauses, args = [], []
        for column in ("state", "session", "server", "audience", "trace", "task"):
            value = filters.get(column)
            if value is not None:
                clauses.append(f"{column}=?")
                args.append(value)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    async def list_json(self, filters: dict[str, str | None], limit: int, now: float) -> tuple[str, int]:
        """Questions oldest first, as one JSON array text, with secondsLeft computed on read."""
        where, args = self._filters(filters)
        # the stored doc never holds secondsLeft, so it is appended as text: no JSON re-parse per row
        rows = await self._rows(
            "SELECT substr(doc, 1, length(doc) - 1) || ',\"secondsLeft\":' ||"
            " CASE WHEN state='pending' THEN max(0, CAST(expires - ? + 0.999 AS INTEGER)) ELSE 0 END || '}'"
            f" FROM elicitations{where} ORDER BY created, rowid LIMIT ?",
            (now, *args, limit),
        )
        return "[" + ",".join(r[0] for r in rows) + "]", len(rows)

    async def list_docs(self, filters: dict[str, str | None], limit: int) -> list[tuple[dict[str, Any], float]]:
        where, args = self._filters(filters)
        rows = await self._rows(f"SELECT doc, expires FROM elicitations{where} ORDER BY created, rowid LIMIT ?", (*args, limit))
        return [(json.loads(d), e) for d, e in rows]

    async def pending_deadlines(self) -> list[tuple[float, str]]:
        rows = await self._rows("SELECT expires, id FROM elicitations WHERE state='pending'")
        return [(float(e), str(i)) for e, i in rows]

    async def audit_rows(self, filters: dict[str, str | None], after: int = 0, limit: int = 1000,
                         kinds: list[str] | None = None) -> list[tuple[int, float, str, dict[str, Any]]]:
        clauses, args = ["seq > ?"], [after]
        for column in ("elicit", "session", "trace", "task"):
            value = filters.get(column)
            if value is not None:
                clauses.append(f"{column}=?")
                args.append(value)
        if kinds:
            clauses.append("(" + " OR ".join("kind LIKE ?" for _ in kinds) + ")")
            args.extend(f"{k}.%" if "." not in k else k for k in kinds)
        rows = await self._rows(
            f"SELECT seq, at, kind, doc FROM audit WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?", (*args, limit)
        )
        return [(int(s), float(a), str(k), json.loads(d)) for s, a, k, d in rows]

    async def last_seq(self) -> int:
        rows = await self._rows("SELECT COALESCE(MAX(seq), 0) FROM audit")
        return int(rows[0][0])

    async def task(self, tid: str) -> dict[str, Any] | None:
        rows = await self._rows("SELECT doc FROM tasks WHERE id=?", (tid,))
        return json.loads(rows[0][0]) if rows else None

    async def tasks_in(self, states: tuple[str, ...]) -> list[dict[str, Any]]:
        marks = ",".join("?" for _ in states)
        rows = await self._rows(f"SELECT doc FROM tasks WHERE state IN ({marks}) ORDER BY updated", states)
        return [json.loads(r[0]) for r in rows]

    async def fact(self, key: str) -> Any:
        rows = await self._rows("SELECT value FROM facts WHERE key=?", (key,))
        return json.loads(rows[0][0]) if rows else None

    async def count(self, state: str) -> int:
        rows = await self._rows("SELECT COUNT(*) FROM elicitations WHERE state=?", (state,))
        return int(rows[0][0])
