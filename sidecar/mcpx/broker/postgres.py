"""PgStore: the store a team's daemons share, on PostgreSQL, through psycopg 3 (broker/store.py).

The same shape as SqliteStore: units of work run whole on one writer thread, a batch of them per
transaction (group commit), reads on a reader thread. What sharing adds:

- One order. Every write transaction of every daemon first takes one transaction-level advisory
  lock, so writes are serialised across daemons as SQLite serialises them within one: an audit
  seq is handed out only after every smaller one has committed, and a reader that sees seq N has
  seen all before it. Replay by seq (Last-Event-ID) never skips a record that commits late, and
  "first answer wins" and "each expiry once" are the conditional updates they are in SQLite.
- Push. A transaction that wrote audit records NOTIFYs (delivered at its commit, in commit order)
  with its last seq; every daemon LISTENs on a connection of its own and reads what it has not
  yet handed on, in seq order, from the log itself: a notification lost while the connection was
  down costs nothing, the catch-up after reconnecting reads it.
- Leases. Each daemon keeps a row in `daemons` (id, user, host, pid, heartbeat); a daemon whose
  heartbeat is older than the lease has lapsed, and the others may end what it cannot finish.

Tables live in the schema `mcpx` (created and migrated by mcpx, its version in `schema_version`);
a database whose schema is newer than this mcpx knows is refused before anything is read or written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import psycopg

from mcpx.broker.commits import CommitQueue, Committed, Unit, run_units
from mcpx.broker.documents import record_of
from mcpx.broker.models import AuditRecord, StoredTask, TaskState
from mcpx.broker.refusals import StoreUnavailable
from mcpx.broker.sql import AUDIT_INSERT, SqlReads, SqlTx, audit_values
from mcpx.broker.store import (
    Follower,
    Identity,
    QuestionRow,
    StoreInfo,
    StoreLease,
    StoreRefused,
    Tx,
)
from mcpx.broker.store_thread import StoreThread
from mcpx.shared.masking import shown_url

T = TypeVar("T")
log = logging.getLogger("mcpx.store")

SCHEMA = "mcpx"
SCHEMA_VERSION = 3
CHANNEL = "mcpx_audit"
WRITE_LOCK = 0x6D637078  # "mcpx": the advisory lock every daemon's write transaction holds
CONNECT_TIMEOUT = 5

# each version's statements, applied in order to bring a database from the one before
MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE elicitations (
    id       TEXT PRIMARY KEY,
    ord      BIGINT GENERATED ALWAYS AS IDENTITY,
    session  TEXT NOT NULL,
    server   TEXT NOT NULL,
    audience TEXT NOT NULL,
    state    TEXT NOT NULL,
    created  DOUBLE PRECISION NOT NULL,
    expires  DOUBLE PRECISION NOT NULL,
    trace    TEXT,
    task     TEXT,
    daemon   TEXT NOT NULL,
    doc      TEXT NOT NULL
);
CREATE INDEX elicitations_state ON elicitations(state, created, ord);
CREATE INDEX elicitations_session ON elicitations(session, state, created);
CREATE INDEX elicitations_trace ON elicitations(trace);
CREATE INDEX elicitations_task ON elicitations(task);
CREATE TABLE answers (
    id  TEXT PRIMARY KEY REFERENCES elicitations(id),
    doc TEXT NOT NULL
);
CREATE TABLE audit (
    seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      DOUBLE PRECISION NOT NULL,
    kind    TEXT NOT NULL,
    elicit  TEXT,
    session TEXT,
    trace   TEXT,
    task    TEXT,
    doc     TEXT NOT NULL
);
CREATE INDEX audit_elicit ON audit(elicit);
CREATE INDEX audit_session ON audit(session, seq);
CREATE INDEX audit_trace ON audit(trace);
CREATE TABLE tasks (
    id      TEXT PRIMARY KEY,
    state   TEXT NOT NULL,
    session TEXT,
    daemon  TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    doc     TEXT NOT NULL
);
CREATE INDEX tasks_state ON tasks(state, daemon);
CREATE TABLE facts (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    at    DOUBLE PRECISION NOT NULL
);
CREATE TABLE daemons (
    id        TEXT PRIMARY KEY,
    "user"    TEXT NOT NULL,
    host      TEXT NOT NULL,
    pid       INTEGER NOT NULL,
    version   TEXT NOT NULL,
    started   TIMESTAMPTZ NOT NULL,
    heartbeat TIMESTAMPTZ NOT NULL
);
""",
    # whether named people's approvals decide a question, as a column (QuestionRow.approvals): a start finds the
    # approvals' schedules by it. The rows an older mcpx wrote say it in their document
    2: """
ALTER TABLE elicitations ADD COLUMN approvals BOOLEAN NOT NULL DEFAULT false;
UPDATE elicitations SET approvals = true
 WHERE doc LIKE '%"approvals":{%' AND jsonb_typeof(doc::jsonb -> 'approvals') = 'object';
""",
    # people's passkeys (docs/presence.md): a team's daemons share them, with their sign counts
    3: """
CREATE TABLE IF NOT EXISTS passkeys (
    id         TEXT PRIMARY KEY,
    person     TEXT NOT NULL,
    public_key TEXT NOT NULL,
    sign_count BIGINT NOT NULL,
    created    DOUBLE PRECISION NOT NULL,
    last_used  DOUBLE PRECISION
);
""",
}


def _pg(tx: Tx) -> PgTx:
    """The Tx of this store's own units (leases): a PgTx, as every unit this store runs is given."""
    assert isinstance(tx, PgTx)
    return tx


class PgTx(SqlTx):
    """The statements of one unit of work, on the writer's thread, inside the batch's transaction."""

    mark = "%s"
    OWNER = ("daemon",)  # which daemon of the team wrote a question or holds a task
    RETURNING = " RETURNING seq"

    def __init__(self, db: psycopg.Connection[Any], daemon: str) -> None:
        super().__init__(db, (daemon,))
        self._daemon = daemon

    def audit_encoded(self, records: Sequence[tuple[AuditRecord, str]]) -> None:
        """Several records in one statement run per row (the task.done of a commit's plain calls): psycopg sends them
        in one pipeline and each returns its seq, in order, where a statement each waited for its own round trip."""
        if len(records) < 2:
            super().audit_encoded(records)
            return
        cur = self._db.cursor()
        cur.executemany(self.sql(AUDIT_INSERT + self.RETURNING),
                        [audit_values(record, doc) for record, doc in records], returning=True)
        for record, doc in records:
            row = cur.fetchone()
            assert row is not None
            self.records.append(record.numbered(int(row[0]), doc))
            cur.nextset()

    def claim_task(self, tid: str, owner: str) -> bool:
        """Take a call task over from `owner`, whose lease lapsed; False if another daemon took it first."""
        cur = self._db.execute("UPDATE tasks SET daemon=%s WHERE id=%s AND daemon=%s", (self._daemon, tid, owner))
        return bool(cur.rowcount == 1)

    def beat(self, me: Identity) -> None:
        self._db.execute(
            'INSERT INTO daemons (id, "user", host, pid, version, started, heartbeat) VALUES (%s,%s,%s,%s,%s,now(),'
            "now()) ON CONFLICT(id) DO UPDATE SET heartbeat=now(), pid=excluded.pid, host=excluded.host,"
            ' "user"=excluded."user", version=excluded.version,'
            " started=CASE WHEN daemons.pid = excluded.pid THEN daemons.started ELSE now() END",
            (me.id, me.user, me.host, me.pid, me.version),
        )

    def leave(self, me: Identity) -> None:
        self._db.execute("DELETE FROM daemons WHERE id=%s AND pid=%s", (me.id, me.pid))


class PgStore(SqlReads):
    """A PostgreSQL database shared by a team's daemons: writer, reader and listener connections of its own."""

    mark = "%s"
    INSERTED = "ord"

    def __init__(self, dsn: str, me: Identity, lease: float = 30.0) -> None:
        self.dsn = dsn
        self.me = me
        self.lease = lease  # seconds without a heartbeat after which a daemon counts as gone
        self._writes = StoreThread("mcpx-pg-write")
        self._reads = StoreThread("mcpx-pg-read")
        self._writer: psycopg.Connection[Any] | None = None
        self._reader: psycopg.Connection[Any] | None = None
        self._commits = CommitQueue(self._commit, self._committed)
        self._follower: Follower | None = None
        self._published = 0  # the seq of the last record handed to the follower
        self._mine: set[int] = set()  # seqs this daemon wrote that are not yet handed on
        self._behind = asyncio.Event()  # the log holds records not yet handed on: catch up
        self._background: list[asyncio.Task[None]] = []
        self.listening = asyncio.Event()  # set while the listener's connection is up

    @property
    def info(self) -> StoreInfo:
        return StoreInfo(kind="postgresql", where=shown_url(self.dsn), daemon=self.me, lease=self.lease)

    def follow(self, follower: Follower) -> None:
        self._follower = follower

    # ---- connections

    def _connect(self, autocommit: bool) -> psycopg.Connection[Any]:
        try:
            return psycopg.Connection.connect(self.dsn, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT,
                                              options=f"-c search_path={SCHEMA}", application_name="mcpx")
        except psycopg.Error as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreUnavailable(f"the store {shown_url(self.dsn)} cannot be reached ({why}); nothing was written: "
                                "try again once PostgreSQL is back")

    async def open(self) -> None:
        await self._writes.run(self._open_writer)
        self._published = await self.last_seq()
        self._background = [asyncio.create_task(self._listen(), name="mcpx-pg-listen"),
                            asyncio.create_task(self._catch_up(), name="mcpx-pg-catch-up"),
                            asyncio.create_task(self._heartbeat(), name="mcpx-pg-heartbeat")]

    def _open_writer(self) -> None:
        db = self._connect(autocommit=False)
        try:
            migrate(db, self.dsn)
            with db.transaction():
                PgTx(db, self.me.id).beat(self.me)
        except BaseException:
            db.close()
            raise
        self._writer = db

    async def close(self) -> None:
        await self._commits.drain()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self._writer is not None:  # a clean stop gives the lease up at once: nobody waits for it to lapse
            try:
                await self.write(lambda tx: _pg(tx).leave(self.me))
            except StoreUnavailable as exc:
                log.warning("could not give up this daemon's lease: %s", exc)
        for thread, conn in ((self._reads, self._reader), (self._writes, self._writer)):
            if conn is not None:
                await thread.run(conn.close)
            thread.shutdown()
        self._reader = self._writer = None

    # ---- writes

    async def write(self, unit: Callable[[Tx], T]) -> T:
        return await self.submit(unit)

    def submit(self, unit: Callable[[Tx], T], within: float = 0.0, waited: bool = True) -> asyncio.Future[T]:
        return self._commits.submit(unit, within, waited)

    def holds(self, test: Callable[[Unit], bool]) -> bool:
        return self._commits.holds(test)

    async def _commit(self, units: list[Unit], behind: bool = False) -> Committed:
        """A batch crosses to the writer's thread: a commit waits on the network and the server, never the loop
        (`behind` or not)."""
        return await self._writes.run(self._run_batch, units)

    def _run_batch(self, units: list[Unit]) -> Committed:
        """On the writer's thread: the team's write lock, each unit in its own savepoint, one commit."""
        db = self._locked_writer()
        tx = PgTx(db, self.me.id)
        try:
            row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM audit").fetchone()
            after = int(row[0]) if row else 0
            out = run_units(tx, units, db.execute)
            if tx.records:
                # seen as this daemon's before the commit, so a catch-up that reads them first knows them
                self._mine.update(r.seq for r in tx.records)
                db.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{tx.records[-1].seq} {self.me.id}"))
            db.commit()
        except psycopg.OperationalError as exc:
            db.close()  # a broken connection is opened afresh by the next batch
            raise self._unavailable(exc) from None
        except BaseException:
            if not db.closed:
                db.rollback()
            raise
        return Committed(out, tx.records, tx.questions, after)

    def _locked_writer(self) -> psycopg.Connection[Any]:
        """The writer, in a transaction holding the team's write lock."""
        conn: psycopg.Connection[Any] = self._on(
            "_writer", False, lambda db: db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,)))
        return conn

    def _on(self, which: str, autocommit: bool, use: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        """`use` on the connection kept as `which`. One PostgreSQL dropped while it was idle (a restart) is found
        out here, before anything was written, and opened again, once; the writer is returned itself."""
        for attempt in (1, 2):
            conn: psycopg.Connection[Any] | None = getattr(self, which)
            if conn is None or conn.closed or conn.broken:
                conn = self._connect(autocommit)
                setattr(self, which, conn)
            try:
                out = use(conn)
                return conn if which == "_writer" else out
            except psycopg.OperationalError as exc:
                conn.close()
                if attempt == 2:
                    raise self._unavailable(exc) from None
        raise AssertionError("unreachable")

    def _committed(self, done: Committed) -> None:
        """This daemon's batch committed: hand its records on now if nothing of another's came between."""
        fresh = [r for r in done.records if r.seq > self._published]
        if not fresh:
            return  # a catch-up read them from the log already
        if done.after <= self._published:
            self._hand_on(fresh, True, done.questions)
        else:
            self._behind.set()  # another daemon's records come first: the catch-up reads all in order

    def _hand_on(self, records: list[AuditRecord], ours: bool, rows: list[QuestionRow]) -> None:
        self._published = records[-1].seq
        self._mine.difference_update(r.seq for r in records)
        if self._follower is not None:
            self._follower(records, ours, rows)

    # ---- following the other daemons

    async def _listen(self) -> None:
        """LISTEN on a connection of its own, reconnecting while PostgreSQL is away; catch up on each reconnect."""
        delay = 0.05
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                        self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT, application_name="mcpx") as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    self._behind.set()  # whatever was committed while nobody here listened
                    delay = 0.05
                    async for note in conn.notifies():
                        last, _, who = note.payload.partition(" ")
                        if who != self.me.id and int(last) > self._published:
                            self._behind.set()
            except (psycopg.Error, OSError) as exc:
                if self.listening.is_set():
                    log.warning("lost the store's notifications (%s); reconnecting", exc)
            self.listening.clear()
            await asyncio.sleep(delay)  # a bounded back-off: PostgreSQL is restarting or unreachable
            delay = min(delay * 2, 2.0)

    async def _catch_up(self) -> None:
        """Hand on, in seq order, every committed record not yet handed on, whoever wrote it."""
        while True:
            await self._behind.wait()
            self._behind.clear()
            try:
                while True:
                    read = await self._log_page(self._published, 500)
                    # a local commit may have gone first
                    page = [(r, row) for r, row in read if r.seq > self._published]
                    if page:
                        run: list[tuple[AuditRecord, QuestionRow | None]] = []
                        for each in page:  # in runs of ours and theirs, in order
                            if run and (each[0].seq in self._mine) != (run[0][0].seq in self._mine):
                                self._hand_on_run(run)
                                run = []
                            run.append(each)
                        self._hand_on_run(run)
                    if len(read) < 500:
                        break
            except StoreUnavailable as exc:
                log.warning("catching up with the store failed (%s); the listener retries on reconnect", exc)

    def _hand_on_run(self, run: list[tuple[AuditRecord, QuestionRow | None]]) -> None:
        rows = {row.id: row for _, row in run if row is not None}
        self._hand_on([r for r, _ in run], run[0][0].seq in self._mine, list(rows.values()))

    async def _log_page(self, after: int, limit: int) -> list[tuple[AuditRecord, QuestionRow | None]]:
        """The log after `after`, each record with the row of the question it is about, in one statement: one
        snapshot, so a row is never older than the records read with it."""
        rows = await self._rows(
            f"SELECT a.seq, a.doc, {', '.join('e.' + c for c in QuestionRow._fields)} FROM audit a"
            " LEFT JOIN elicitations e ON e.id = a.elicit WHERE a.seq > %s ORDER BY a.seq LIMIT %s", (after, limit))
        return [(record_of(int(row[0]), row[1]), QuestionRow(*row[2:]) if row[2] is not None else None)
                for row in rows]

    async def _heartbeat(self) -> None:
        """Renew this daemon's lease a few times per lease period, whatever the writer is doing otherwise."""
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                await self.write(lambda tx: _pg(tx).beat(self.me))
            except StoreUnavailable as exc:
                log.warning("could not renew this daemon's lease: %s", exc)

    # ---- reads

    async def _read(self, read: Callable[[psycopg.Connection[Any]], T]) -> T:
        return await self._reads.run(self._read_now, read)

    def _read_now(self, read: Callable[[psycopg.Connection[Any]], T]) -> T:
        result: T = self._on("_reader", True, read)
        return result

    async def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await self._read(lambda db: db.execute(sql, args).fetchall())

    async def tasks_in(self, states: tuple[TaskState, ...]) -> list[StoredTask]:
        """This daemon's own tasks: another's are its to resume, or the team's once its lease lapses."""
        rows = await self._rows("SELECT doc FROM tasks WHERE state = ANY(%s) AND daemon=%s ORDER BY updated",
                                (list(states), self.me.id))
        return [StoredTask.model_validate_json(r[0]) for r in rows]

    # ---- the team

    async def daemons(self) -> list[StoreLease]:
        """Every daemon with a lease row, whether its heartbeat is within the lease, this one first."""
        rows = await self._rows(
            'SELECT id, "user", host, pid, version, started, heartbeat,'
            " heartbeat > now() - make_interval(secs => %s) FROM daemons ORDER BY id <> %s, host, id",
            (self.lease, self.me.id))
        return [StoreLease(*row) for row in rows]

    async def lapsed_tasks(self, states: tuple[TaskState, ...]) -> list[tuple[StoreLease, StoredTask]]:
        """Unfinished tasks of daemons whose lease lapsed (or that hold no lease), with whose they are."""
        rows = await self._rows(
            'SELECT t.doc, t.daemon, d."user", d.host, d.pid, d.version, d.started, d.heartbeat FROM tasks t'
            " LEFT JOIN daemons d ON d.id = t.daemon WHERE t.state = ANY(%s) AND t.daemon <> %s"
            " AND (d.id IS NULL OR d.heartbeat <= now() - make_interval(secs => %s)) ORDER BY t.updated",
            (list(states), self.me.id, self.lease))
        out = []
        for doc, daemon, user, host, pid, version, started, beat in rows:
            lease = StoreLease(daemon, user or "?", host or "?", pid or 0, version or "?",
                          started or datetime.fromtimestamp(0), beat or datetime.fromtimestamp(0), False)
            out.append((lease, StoredTask.model_validate_json(doc)))
        return out


def migrate(db: psycopg.Connection[Any], dsn: str) -> None:
    """Create mcpx's schema, or bring it to this mcpx's version; refuse a newer one. Under the write lock, so
    daemons starting together migrate once."""
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        exists = db.execute("SELECT 1 FROM pg_namespace WHERE nspname=%s", (SCHEMA,)).fetchone()
        try:
            if not exists:
                db.execute(f"CREATE SCHEMA {SCHEMA}")
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StoreRefused(f"the store {shown_url(dsn)} does not let this user create mcpx's schema "
                               f"'{SCHEMA}' ({exc.diag.message_primary}); see docs/teams.md for the grants") from None
        row = db.execute("SELECT version FROM schema_version").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreRefused(f"the store {shown_url(dsn)} holds mcpx schema version {version}, newer than this mcpx "
                               f"understands ({SCHEMA_VERSION}): upgrade mcpx here (pip install -U mcpx) before "
                               "pointing it at this database; nothing was read or written")
        for step in range(version + 1, SCHEMA_VERSION + 1):
            db.execute(MIGRATIONS[step])
            log.info("store %s: schema migrated to version %d", shown_url(dsn), step)
        if row is None:
            db.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))
        elif version < SCHEMA_VERSION:
            db.execute("UPDATE schema_version SET version=%s", (SCHEMA_VERSION,))
