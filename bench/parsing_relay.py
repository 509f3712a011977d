"""A floor that reads every message: a relay in Python that parses each JSON-RPC line both ways and writes it again.

    python bench/parsing_relay.py COMMAND [ARGS...]

bench/bare_relay.py copies bytes and reads no message; this one does what any MCP proxy must at the least:
splits the stream into lines, parses each message (json.loads), gives a request its own id on the way in
and the client's back on the way out (a proxy multiplexes), and encodes it again (json.dumps), on the loop
mcpx's daemon runs (uvloop when installed). What mcpx costs beyond this is its own bookkeeping, not JSON
and not the hops. bench/speed.py times it beside mcpx as the second floor of figures 1-3; like the bare
relay, it is no peer (it speaks MCP only as far as a line of JSON goes).

    python bench/parsing_relay.py --durable DB COMMAND [ARGS...]

The third floor (issue 39's second angle on the daemon's CPU per call and on figure 2): the same relay keeping
the records mcpx keeps, in mcpx.db's own tables (mcpx's migrations, indexes and statements, broker/sqlite.py's
pragmas), with nothing else of mcpx's. A server's `elicitation/create` is a question committed (its row and its
`elicit.open` record, on the loop, before it is written to the client: a question is on disk before anyone is told
of it); the client's answer goes to the server first, then its record (the row moved to answered, the answer's row,
`elicit.answered`) and each `tools/call`'s end (its task row and `task.done`) wait for one commit on a thread of its
own within BEHIND (50 ms), as a plain call's end does in the daemon (broker/writes.py's `end_call`); the end of a
call that asked commits at once, on that thread, with whatever waited, as the daemon's does. What any
gateway that keeps mcpx's promises (a call's audit and result kept, a question durable) pays at the least.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import secrets
import sqlite3
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BEHIND = 0.05  # broker/broker.py's: how long a call's end may wait for company before its commit


class _Relay:
    """The two directions' state: the ids this relay gave the client's requests, and the client's own."""

    def __init__(self, records: _Records | None = None) -> None:
        self.ids = itertools.count(1)
        self.client_ids: dict[int, Any] = {}
        self.records = records
        self.calls: dict[int, tuple[Any, dict[str, Any], float]] = {}  # ours -> the tool, its arguments, when
        self.asked: dict[Any, tuple[dict[str, Any], float]] = {}  # a server's question's id -> its row, when
        # the calls in flight when a server asked (a relay cannot tell which one asked: figure 2 has one in flight)
        self.asking: set[int] = set()

    def inward(self, line: bytes) -> bytes:
        msg = json.loads(line)
        if isinstance(msg, dict) and "method" in msg and "id" in msg:
            ours = next(self.ids)
            self.client_ids[ours] = msg["id"]
            msg["id"] = ours
            if self.records is not None and msg["method"] == "tools/call":
                params = msg.get("params") or {}
                self.calls[ours] = (params.get("name"), params.get("arguments") or {}, time.time())
        encoded = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        if self.records is not None and isinstance(msg, dict) and "method" not in msg and msg.get("id") in self.asked:
            q, asked = self.asked.pop(msg["id"])
            self.records.answered(q, msg.get("result") or {}, asked, encoded)  # written to the server first
            return b""
        return encoded

    def outward(self, line: bytes) -> bytes:
        msg = json.loads(line)
        records = self.records
        if isinstance(msg, dict) and "method" not in msg and msg.get("id") in self.client_ids:
            ours = msg["id"]
            msg["id"] = self.client_ids.pop(ours)
            if records is not None and ours in self.calls:
                encoded = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
                asked = ours in self.asking
                self.asking.discard(ours)
                records.ended(self.calls.pop(ours), msg.get("result"), encoded, asked)  # written to the client first
                return b""
        elif records is not None and isinstance(msg, dict) and msg.get("method") == "elicitation/create":
            self.asked[msg.get("id")] = (records.question(msg.get("params") or {}), time.time())
            self.asking.update(self.calls)
        return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


class _Records:
    """mcpx.db's tables behind one writer connection: a question committed on the loop before it is told; answers'
    records and calls' ends committed together on a thread of their own, within BEHIND of the first of them."""

    def __init__(self, path: Path) -> None:
        import durable_floor  # mcpx's tables and statements, and the documents of its durable floor (figure 6)
        from mcpx.broker.sqlite import migrate

        self.floor = durable_floor
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("busy_timeout=5000", "journal_mode=WAL", "synchronous=NORMAL"):
            self.db.execute(f"PRAGMA {pragma}")
        migrate(self.db, path)
        self.db.execute("PRAGMA wal_autocheckpoint=0")  # as the daemon's: its checkpoints are not on a write's way
        self.out: Any = None  # where answers and results are written: set once the pipes are open
        self.to_server: Any = None
        self._queued: list[durable_floor.Unit] = []
        self._timer: asyncio.TimerHandle | None = None  # the horizon of what is queued
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-store")
        self._writer = threading.Lock()  # one writer connection: a question's commit waits for a batch's, as mcpx's
        self.session = "relay-" + secrets.token_hex(4)

    def question(self, params: dict[str, Any]) -> dict[str, Any]:
        """A server's question, on disk before the client is told of it (its row and its `elicit.open`)."""
        now = time.time()
        q = self.floor.question("elc-" + secrets.token_hex(8), {"session": self.session, **params}, now)
        unit = self.floor.opened(q, now)
        with self._writer:
            self._transaction([unit])
        return q

    def answered(self, q: dict[str, Any], result: dict[str, Any], asked: float, encoded: bytes) -> None:
        self.to_server.write(encoded)
        now = time.time()
        answer = {**self.floor.answer(q["id"], result.get("content"), asked, now), "action": result.get("action")}
        self._queue(self.floor.answered(q, answer))

    def ended(self, call: tuple[Any, dict[str, Any], float], result: Any, encoded: bytes, asked: bool) -> None:
        """A call's end recorded after its result went: within BEHIND, or at once (on the thread) for a call that
        asked, as the daemon does (its stored row said it was waiting: a restart must not find it so)."""
        self.out.write(encoded)
        tool, arguments, began = call
        now = time.time()
        tid = "tsk-" + secrets.token_hex(8)
        stamp = self.floor.stamp
        doc = json.dumps({"id": tid, "trace": tid, "server": "peer", "tool": tool, "session": self.session,
                          "sessionSource": "argument", "state": "completed", "era": "legacy", "questions": [],
                          "open": [], "created": stamp(began), "updated": stamp(now), "result": result,
                          "arguments": arguments, "cwd": "/", "surface": "mcp", "policyMode": "ask"},
                         separators=(",", ":"))
        record = json.dumps({"at": stamp(now), "kind": "task.done", "session": self.session, "trace": tid,
                             "task": tid, "pid": os.getpid(),
                             "data": {"state": "completed", "server": "peer", "tool": tool}}, separators=(",", ":"))
        session = self.session

        def unit(db: sqlite3.Connection) -> None:
            db.execute(TASK_UPSERT, (tid, "completed", session, now, doc))
            db.execute(self.floor.AUDIT_INSERT, (now, "task.done", None, session, tid, tid, record))

        self._queue(unit)
        if asked:
            self._flush()

    def _queue(self, unit: Any) -> None:
        self._queued.append(unit)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(BEHIND, self._flush)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._queued = self._queued, []
        self._thread.submit(self._commit, batch)

    def _commit(self, batch: list[Any]) -> None:
        with self._writer:
            self._transaction(batch)

    def _transaction(self, units: list[Any]) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            for unit in units:
                unit(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """What still waits for its commit is committed (the client went before its horizon), then closed."""
        self._thread.shutdown()
        if self._queued:
            self._commit(self._queued)
        self.db.close()


TASK_UPSERT = ("INSERT INTO tasks (id, state, session, updated, doc) VALUES (?,?,?,?,?)"
               " ON CONFLICT(id) DO UPDATE SET state=excluded.state, updated=excluded.updated, doc=excluded.doc")


class _Lines(asyncio.Protocol):
    """Bytes in, whole lines out through `each`, written to `out`."""

    def __init__(self, each: Any, out: Any, done: asyncio.Future[None]) -> None:
        self.each, self.out, self.done = each, out, done
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        for line in lines:
            if line.strip() and (encoded := self.each(line)):
                self.out.write(encoded)

    def eof_received(self) -> bool:
        if not self.done.done():
            self.done.set_result(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def relay(argv: list[str], records: _Records | None) -> int:
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    loop = asyncio.get_running_loop()
    state = _Relay(records)
    client_gone: asyncio.Future[None] = loop.create_future()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(sys.stdout.fileno(), "wb", 0))
    if records is not None:
        records.out, records.to_server = out, proc.stdin
    await loop.connect_read_pipe(lambda: _Lines(state.inward, proc.stdin, client_gone),
                                 os.fdopen(sys.stdin.fileno(), "rb", 0))
    buffer = b""
    while chunk := await proc.stdout.read(65536):
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            if line.strip() and (encoded := state.outward(line)):
                out.write(encoded)
    return await proc.wait()


def relay_pid(durable: bool) -> int:
    """The relay this process started (bench/speed.py's and call_cost.py's SDK client): its child running this file,
    with `--durable` or without."""
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int((proc / "stat").read_text().rsplit(") ", 1)[1].split()[1])
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if ppid == os.getpid() and any(a.endswith(b"parsing_relay.py") for a in argv) \
                    and (b"--durable" in argv) == durable:
                return int(proc.name)
    raise RuntimeError(f"no {'durable ' if durable else ''}parsing relay is running")


def main() -> int:
    argv = sys.argv[1:]
    records = None
    if argv[:1] == ["--durable"] and len(argv) > 1:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        records, argv = _Records(Path(argv[1])), argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import uvloop  # the daemon's loop, where it is installed
    except ImportError:
        return asyncio.run(relay(argv, records))
    try:
        return uvloop.run(relay(argv, records))
    finally:
        if records is not None:
            records.close()


if __name__ == "__main__":
    raise SystemExit(main())
