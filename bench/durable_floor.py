"""Figure 6's durable floor (issue 39): what a lifecycle costs a Python server that makes it durable as mcpx must.

bench/broker.py's `role_durable_floor` is its bare aiohttp server (`role_floor`: the same three requests, the same
replies) with this store under it. A question's row and its `elicit.open` record are committed before the 201;
the accept's update of the row, the answer's row and its `elicit.answered` record before anyone hears of the
answer (the waiter, the accept's own reply). It commits the way docs/internals.md says mcpx does: mcpx.db's own
tables (mcpx's migrations, so the same indexes are kept up), one writer connection with broker/sqlite.py's pragmas
(WAL, synchronous=NORMAL, no automatic checkpoint), the units queued when a commit runs share it, each in a
savepoint when there are several, the commit on the event loop itself (`thread`: on a writer thread, issue 39's
experiment), and a PASSIVE checkpoint every CHECKPOINT_EVERY units on a thread of its own. The same statements a
lifecycle as mcpx (5 writes, 4 savepoint statements, a share of BEGIN and COMMIT) and the same documents' sizes;
stdlib json, no pydantic, no broker.

What mcpx could not also do is left out: nothing is kept only in memory, no answer is told before its commit. The
store counts the CPU its commits take on the loop's thread (`time.thread_time`: SQLite's work and the few Python
steps that bind the statements' values; the documents are encoded before a unit is queued) and its checkpoints on
theirs, so a run can say how much of a durable lifecycle is SQLite and how much is Python around it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mcpx.broker.documents import ROW_COLUMNS
from mcpx.broker.sql import AUDIT_INSERT
from mcpx.broker.sqlite import CHECKPOINT_EVERY, migrate

QUESTION_INSERT = f"INSERT INTO elicitations ({ROW_COLUMNS}) VALUES ({','.join('?' * len(ROW_COLUMNS.split(',')))})"
# documents.update_row's statement: the row moves only from the state it was read in
QUESTION_UPDATE = "UPDATE elicitations SET state=?, audience=?, doc=?, approvals=? WHERE id=? AND state=?"
ANSWER_INSERT = "INSERT INTO answers (id, doc) VALUES (?,?)"
TTL_S = 120.0  # the daemon's default for a question asked over REST (its 201 says secondsLeft 120)
REASON = "free input (repo): the agent may answer if it truly knows; if it declines, the person is asked"

Unit = Callable[[sqlite3.Connection], Any]


def stamp(t: float) -> str:
    """An ISO time with milliseconds, as mcpx writes its documents' times."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def question(eid: str, body: dict[str, Any], now: float) -> dict[str, Any]:
    """A question as mcpx stores it for bench/broker.py's ask (517 bytes encoded, as the daemon's row)."""
    return {"id": eid, "session": body.get("session"), "sessionSource": "argument", "server": "mcpx", "mode": "form",
            "message": body.get("message"), "requestedSchema": body.get("requestedSchema"),
            "audience": "agent-then-human", "reason": REASON, "created": stamp(now),
            "expiresAt": stamp(now + TTL_S), "state": "pending", "escalated": False, "ambiguous": False,
            "secretFields": [], "presence": False}


def answer(eid: str, content: Any, asked: float, now: float) -> dict[str, Any]:
    return {"id": eid, "action": "accept", "content": content, "by": "person:rest", "at": stamp(now),
            "pid": os.getpid(), "answeredAfterMs": round(1000 * (now - asked))}


def opened(q: dict[str, Any], asked: float) -> Unit:
    """The open's unit: the question's row and its `elicit.open` record (the daemon's two INSERTs)."""
    row = (q["id"], q["session"], q["server"], q["audience"], q["state"], asked, asked + TTL_S, None, None,
           json.dumps(q, separators=(",", ":")), 0)
    data = {"server": "mcpx", "tool": None, "mode": "form", "audience": q["audience"], "reason": q["reason"],
            "expiresAt": q["expiresAt"]}
    record = (asked, "elicit.open", q["id"], q["session"], None, None, record_doc("elicit.open", q, asked, data))

    def unit(db: sqlite3.Connection) -> int:
        db.execute(QUESTION_INSERT, row)
        return int(db.execute(AUDIT_INSERT, record).lastrowid or 0)  # the record's seq, as the daemon reads it

    return unit


def answered(q: dict[str, Any], a: dict[str, Any]) -> Unit:
    """The accept's unit: the row moved from pending to answered, the answer's row, its `elicit.answered` record.
    False when the row was not pending (the daemon's 409)."""
    doc = json.dumps({**q, "state": "answered"}, separators=(",", ":"))
    moved = ("answered", q["audience"], doc, 0, q["id"], "pending")
    kept = (q["id"], json.dumps(a, separators=(",", ":")))
    data = {"action": "accept", "by": a["by"], "answeredAfterMs": a["answeredAfterMs"], "content": a["content"]}
    now = time.time()
    record = (now, "elicit.answered", q["id"], q["session"], None, None, record_doc("elicit.answered", q, now, data))

    def unit(db: sqlite3.Connection) -> bool:
        if db.execute(QUESTION_UPDATE, moved).rowcount != 1:
            return False
        db.execute(ANSWER_INSERT, kept)
        db.execute(AUDIT_INSERT, record)
        return True

    return unit


def record_doc(kind: str, q: dict[str, Any], at: float, data: dict[str, Any]) -> str:
    return json.dumps({"at": stamp(at), "kind": kind, "elicit": q["id"], "session": q["session"], "pid": os.getpid(),
                       "data": data}, separators=(",", ":"))


class DurableStore:
    """mcpx.db's tables behind one writer connection on the loop, with group commit. `thread`: each batch commits on
    a writer thread of its own instead (issue 39's experiment: sqlite3 lets go of the GIL inside SQLite's own work,
    so the loop may serve requests while a batch is written), one batch at a time, the units that come meanwhile
    queued for the next; a unit's future is still set only once its batch committed."""

    def __init__(self, path: Path, thread: bool = False) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # a commit survives a kill -9 of the process, as mcpx's
        migrate(self.db, path)
        self.db.execute("PRAGMA busy_timeout=0")
        self.db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpoints fsync: on their own thread, as mcpx's
        self._checkpointer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._checkpointer.execute("PRAGMA synchronous=NORMAL")
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floor-checkpoint")
        self._checkpoint: asyncio.Future[None] | None = None
        self._queue: list[tuple[Unit, asyncio.Future[Any]]] = []
        self._unsaved = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floor-write") if thread else None
        self._flusher: asyncio.Task[None] | None = None
        # what a run reports: commits, units, and the CPU seconds of the commits on the loop (COMMIT alone
        # too: its write() of the pages) and of the checkpoints on their thread
        self.counts: dict[str, float] = dict.fromkeys(("commits", "units", "commit_s", "commit_only_s",
                                                       "checkpoint_s"), 0.0)

    def submit(self, unit: Unit) -> asyncio.Future[Any]:
        """Queue `unit`: it commits with whatever else is queued when the commit runs, its future set after it.
        One callback per batch (call_soon, not mcpx's task: this commit never awaits, it has no lock to wait for)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((unit, fut))
        if self._writer is not None:
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.create_task(self._flush())
        elif len(self._queue) == 1:
            asyncio.get_running_loop().call_soon(self._commit)
        return fut

    async def _flush(self) -> None:
        """`thread`: what is queued, a batch at a time, on the writer thread; the futures set back on the loop."""
        loop = asyncio.get_running_loop()
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                outs = await loop.run_in_executor(self._writer, self._run, batch)
            except Exception as exc:
                self._failed(batch, exc)
                continue
            self._settled(batch, outs)

    def _commit(self) -> None:
        batch, self._queue = self._queue, []
        try:
            outs = self._run(batch)
        except Exception as exc:
            self._failed(batch, exc)
            return
        self._settled(batch, outs)

    @staticmethod
    def _failed(batch: list[tuple[Unit, asyncio.Future[Any]]], exc: Exception) -> None:
        """Nothing of the batch is stored: every unit's caller is told so."""
        for _, fut in batch:
            fut.set_exception(exc)

    def _settled(self, batch: list[tuple[Unit, asyncio.Future[Any]]], outs: list[Any]) -> None:
        """The batch committed: each unit's caller gets its unit's outcome, and a checkpoint is counted towards."""
        for (_, fut), out in zip(batch, outs, strict=True):
            fut.set_result(out)
        self._checkpoint_due(len(batch))

    def _run(self, batch: list[tuple[Unit, asyncio.Future[Any]]]) -> list[Any]:
        """The batch in one transaction, on whichever thread commits (`thread_time` is that thread's CPU)."""
        db = self.db
        t0 = time.thread_time()
        db.execute("BEGIN IMMEDIATE")
        try:
            if len(batch) == 1:  # as broker/commits.py run_units: a batch of one needs no savepoint
                outs = [batch[0][0](db)]
            else:
                outs = []
                for unit, _ in batch:
                    db.execute("SAVEPOINT unit")
                    outs.append(unit(db))
                    db.execute("RELEASE SAVEPOINT unit")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        t1 = time.thread_time()
        db.execute("COMMIT")
        t2 = time.thread_time()
        self.counts["commits"] += 1
        self.counts["units"] += len(batch)
        self.counts["commit_s"] += t2 - t0
        self.counts["commit_only_s"] += t2 - t1
        return outs

    def _checkpoint_due(self, units: int) -> None:
        self._unsaved += units
        if self._unsaved >= CHECKPOINT_EVERY and (self._checkpoint is None or self._checkpoint.done()):
            self._unsaved = 0
            self._checkpoint = asyncio.get_running_loop().run_in_executor(self._thread, self._run_checkpoint)

    def _run_checkpoint(self) -> None:
        t0 = time.thread_time()
        self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        self.counts["checkpoint_s"] += time.thread_time() - t0

    async def close(self) -> None:
        if self._checkpoint is not None:
            await self._checkpoint
        if self._flusher is not None:
            await self._flusher
        self._thread.shutdown()
        if self._writer is not None:
            self._writer.shutdown()
        self._checkpointer.close()
        self.db.close()
