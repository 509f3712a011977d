"""The one writer of mcpx.db: questions, answers, the audit log, tasks (SQLite in WAL mode).

Every unit of work runs under one lock in one transaction, so concurrent coroutines
never interleave half-written state; events are published by the caller only after
`commit` returns, so no subscriber sees what the database does not hold.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

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


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Tx:
    """The statements of one unit of work; only `Store.transaction` makes one."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    async def insert_elicitation(self, row: dict[str, Any], doc: dict[str, Any]) -> None:
        await self._db.execute(
            "INSERT INTO elicitations (id, session, server, audience, state, created, expires, trace, task, doc)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (row["id"], row["session"], row["server"], row["audience"], row["state"], row["created"],
             row["expires"], row.get("trace"), row.get("task"), _dumps(doc)),
        )

    async def update_elicitation(self, eid: str, state: str, audience: str, doc: dict[str, Any],
                                 expect_state: str = "pending") -> bool:
        """Move a question on, only if it is still in `expect_state`; False when someone else got there first."""
        cur = await self._db.execute(
            "UPDATE elicitations SET state=?, audience=?, doc=? WHERE id=? AND state=?",
            (state, audience, _dumps(doc), eid, expect_state),
        )
        return cur.rowcount == 1

    async def elicitation(self, eid: str) -> tuple[dict[str, Any], float] | None:
        async with self._db.execute("SELECT doc, expires FROM elicitations WHERE id=?", (eid,)) as cur:
            row = await cur.fetchone()
        return (json.loads(row[0]), row[1]) if row else None

    async def insert_answer(self, eid: str, doc: dict[str, Any]) -> None:
        await self._db.execute("INSERT INTO answers (id, doc) VALUES (?,?)", (eid, _dumps(doc)))

    async def answer(self, eid: str) -> dict[str, Any] | None:
        async with self._db.execute("SELECT doc FROM answers WHERE id=?", (eid,)) as cur:
            row = await cur.fetchone()
        return json.loads(row[0]) if row else None

    async def audit(self, at: float, kind: str, doc: dict[str, Any]) -> int:
        cur = await self._db.execute(
            "INSERT INTO audit (at, kind, elicit, session, trace, task, doc) VALUES (?,?,?,?,?,?,?)",
            (at, kind, doc.get("elicit"), doc.get("session"), doc.get("trace"), doc.get("task"), _dumps(doc)),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    async def put_task(self, tid: str, state: str, session: str | None, doc: dict[str, Any]) -> None:
        await self._db.execute(
            "INSERT INTO tasks (id, state, session, updated, doc) VALUES (?,?,?,?,?)"
            " ON CONFLICT(id) DO UPDATE SET state=excluded.state, updated=excluded.updated, doc=excluded.doc",
            (tid, state, session, time.time(), _dumps(doc)),
        )

    async def put_fact(self, key: str, value: Any) -> None:
        await self._db.execute(
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
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = await aiosqlite.connect(self.path, isolation_level=None)
        await self._writer.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives the process being killed
        await self._writer.execute("PRAGMA synchronous=NORMAL")
        await self._writer.execute("PRAGMA busy_timeout=5000")
        await self._writer.executescript(SCHEMA)
        self._reader = await aiosqlite.connect(self.path, isolation_level=None)
        await self._reader.execute("PRAGMA busy_timeout=5000")
        await self._reader.execute("PRAGMA query_only=1")
        try:
            self.path.chmod(0o600)
        except OSError:
            pass

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        assert self._writer is not None, "store is not open"
        async with self._lock:
            await self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(self._writer)
            except BaseException:
                await self._writer.execute("ROLLBACK")
                raise
            else:
                await self._writer.execute("COMMIT")

    # ---- reads (the reader connection never blocks the writer in WAL mode)

    async def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        assert self._reader is not None, "store is not open"
        async with self._reader.execute(sql, args) as cur:
            return list(await cur.fetchall())

    async def elicitation(self, eid: str) -> tuple[dict[str, Any], float] | None:
        rows = await self._rows("SELECT doc, expires FROM elicitations WHERE id=?", (eid,))
        return (json.loads(rows[0][0]), rows[0][1]) if rows else None

    async def answer(self, eid: str) -> dict[str, Any] | None:
        rows = await self._rows("SELECT doc FROM answers WHERE id=?", (eid,))
        return json.loads(rows[0][0]) if rows else None

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
        rows = await self._rows(
            "SELECT json_set(doc, '$.secondsLeft',"
            " CASE WHEN state='pending' THEN max(0, CAST(expires - ? + 0.999 AS INTEGER)) ELSE 0 END)"
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
