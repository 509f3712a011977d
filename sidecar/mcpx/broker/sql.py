"""The SQL both stores speak, written once: SQLite (broker/sqlite.py) and PostgreSQL (broker/postgres.py).

The statements are written with `?` for a value; a store whose driver marks values otherwise
(`%s` for psycopg) names its mark and gets them rewritten once, when its class is made. What
differs between the stores stays with them: a team's `daemon` column (`OWNER`), the order of
rows inserted at the same moment (`INSERTED`: SQLite's rowid, PostgreSQL's identity), the locks
and the connections.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from mcpx.broker.documents import (
    QUESTION_COLUMNS,
    ROW_COLUMNS,
    answer_of,
    audit_doc,
    audit_where,
    dumps,
    equal,
    question_of,
    record_of,
    row_of,
    stored_answer,
    task_row,
    update_row,
)
from mcpx.broker.models import Answer, AuditRecord, Elicitation, Passkey, State, StoredTask
from mcpx.broker.store import AuditFilter, QuestionFilter, QuestionRow, TaskDones, TaskRow


class Dialect:
    """A driver's placeholder, and the statements in it."""

    mark: ClassVar[str] = "?"

    @classmethod
    def sql(cls, text: str) -> str:
        return text if cls.mark == "?" else text.replace("?", cls.mark)


class SqlTx(Dialect):
    """The statements of a unit of work both stores make alike. `db` is a DB-API connection (sqlite3's, psycopg's);
    `owner`: the values of the store's OWNER columns for what this daemon writes."""

    OWNER: ClassVar[tuple[str, ...]] = ()
    # how an appended audit record's seq comes back: SQLite gives the row id (RETURNING needs SQLite 3.35, newer
    # than some distributions' own), PostgreSQL returns it
    RETURNING: ClassVar[str] = ""

    def __init__(self, db: Any, owner: tuple[Any, ...] = ()) -> None:
        self._db = db
        self._owner = owner
        self.records: list[AuditRecord] = []  # what this batch wrote to the log, in order
        self.questions: list[QuestionRow] = []  # and the question rows it wrote
        # task.done records written but not made (`TaskDones`, nobody to hear of them yet): where they belong among
        # `records`, the seq of the first, and what they are made of (commits.heard_records)
        self.later: list[tuple[int, int, TaskDones]] = []

    def _columns(self, columns: str) -> tuple[str, str]:
        """`columns` and the OWNER ones, and as many marks."""
        return _columns(columns, self.OWNER, self.mark)

    def insert_question(self, q: Elicitation) -> None:
        row = row_of(q)
        names, marks = self._columns(ROW_COLUMNS)
        self._db.execute(f"INSERT INTO elicitations ({names}) VALUES ({marks})", (*row, *self._owner))
        self.questions.append(row)

    def update_question(self, q: Elicitation, expect_state: State = "pending") -> bool:
        row = update_row(self._db.execute, q, expect_state, self.mark)
        if row is not None:
            self.questions.append(row)
        return row is not None

    def question(self, eid: str) -> Elicitation | None:
        row = self._db.execute(self.sql("SELECT doc FROM elicitations WHERE id=?"), (eid,)).fetchone()
        return question_of(row[0]) if row else None

    def insert_answer(self, answer: Answer) -> None:
        self._db.execute(self.sql("INSERT INTO answers (id, doc) VALUES (?,?)"), (answer.id, stored_answer(answer)))

    def answer(self, eid: str) -> Answer | None:
        row = self._db.execute(self.sql("SELECT doc FROM answers WHERE id=?"), (eid,)).fetchone()
        return answer_of(row[0]) if row else None

    def audit(self, record: AuditRecord) -> AuditRecord:
        doc = audit_doc(record)
        self.audit_encoded([(record, doc)])
        return self.records[-1]

    def audit_encoded(self, records: Sequence[tuple[AuditRecord, str]]) -> None:
        """Append `records`, in order, each with its document as stored (`documents.audit_doc`'s text): each is
        numbered in place with the seq the log gave it, and kept in `self.records`."""
        for record, doc in records:
            cur = self._db.execute(self.sql(AUDIT_INSERT + self.RETURNING), audit_values(record, doc))
            seq = cur.fetchone()[0] if self.RETURNING else cur.lastrowid
            assert seq is not None
            self.records.append(record.numbered(int(seq), doc))

    def audit_dones(self, dones: TaskDones) -> None:
        """Their records made now and appended as any are (`audit_encoded`)."""
        self.audit_encoded([(dones.record(i), doc) for i, doc in enumerate(dones.docs)])

    def _put_task(self) -> str:
        names, marks = self._columns("id, state, session, updated, doc")
        return (f"INSERT INTO tasks ({names}) VALUES ({marks})"
                " ON CONFLICT(id) DO UPDATE SET state=excluded.state, updated=excluded.updated, doc=excluded.doc")

    def put_task(self, task: StoredTask | TaskRow) -> None:
        row = task if isinstance(task, TaskRow) else task_row(task)
        self._db.execute(self._put_task(), (row.id, row.state, row.session, time.time(), row.doc, *self._owner))

    def put_tasks(self, rows: Sequence[TaskRow], at: float) -> None:
        """Keep these tasks' rows over what was kept before, `at` as their update's moment: one statement for them
        all (the ends of a commit's plain calls)."""
        # a cursor's: psycopg's connection has no executemany of its own
        self._db.cursor().executemany(self._put_task(), [(row.id, row.state, row.session, at, row.doc, *self._owner)
                                                         for row in rows])

    def put_fact(self, key: str, value: Any) -> None:
        self._db.execute(
            self.sql("INSERT INTO facts (key, value, at) VALUES (?,?,?)"
                     " ON CONFLICT(key) DO UPDATE SET value=excluded.value, at=excluded.at"),
            (key, dumps(value), time.time()),
        )

    def add_passkey(self, key: Passkey) -> None:
        self._db.execute(self.sql("INSERT INTO passkeys (id, person, public_key, sign_count, created, last_used)"
                                  " VALUES (?,?,?,?,?,NULL)"),
                         (key.id, key.person, key.public_key, key.sign_count, key.created.timestamp()))

    def passkey(self, cid: str) -> Passkey | None:
        rows = self._db.execute(self.sql(f"SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE id=?"), (cid,)).fetchall()
        return passkey_of(rows[0]) if rows else None

    def use_passkey(self, cid: str, count: int, at: float) -> bool:
        # compare and set: a sign count that did not grow (a counter kept at 0 aside) is a copy or a replay
        cur = self._db.execute(self.sql("UPDATE passkeys SET sign_count=?, last_used=? WHERE id=?"
                                        " AND (sign_count < ? OR (sign_count = 0 AND ? = 0))"),
                               (count, at, cid, count, count))
        return bool(cur.rowcount)

    def remove_passkey(self, person: str, cid: str) -> bool:
        cur = self._db.execute(self.sql("DELETE FROM passkeys WHERE person=? AND id=?"), (person, cid))
        return bool(cur.rowcount)


AUDIT_INSERT = "INSERT INTO audit (at, kind, elicit, session, trace, task, doc) VALUES (?,?,?,?,?,?,?)"


def audit_values(record: AuditRecord, doc: str) -> tuple[Any, ...]:
    return record.at.timestamp(), record.kind, record.elicit, record.session, record.trace, record.task, doc


@functools.cache
def _columns(columns: str, owner: tuple[str, ...], mark: str) -> tuple[str, str]:
    names = [c.strip() for c in columns.split(",")] + list(owner)
    return ", ".join(names), ",".join([mark] * len(names))


PASSKEY_COLUMNS = "id, person, public_key, sign_count, created, last_used"


def passkey_of(row: tuple[Any, ...]) -> Passkey:
    cid, person, public_key, count, created, used = row
    return Passkey(id=cid, person=person, public_key=public_key, sign_count=int(count),
                   created=datetime.fromtimestamp(created, UTC),
                   last_used=datetime.fromtimestamp(used, UTC) if used is not None else None)


class SqlReads(Dialect):
    """The reads both stores serve alike, each one statement through the store's own `_rows`."""

    INSERTED: ClassVar[str] = "rowid"  # the column that orders rows inserted at the same `created`

    async def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def question(self, eid: str) -> tuple[Elicitation, Answer | None] | None:
        rows = await self._rows(self.sql("SELECT e.doc, a.doc FROM elicitations e LEFT JOIN answers a ON a.id = e.id"
                                         " WHERE e.id=?"), (eid,))
        if not rows:
            return None
        doc, answer = rows[0]
        return question_of(doc), (answer_of(answer) if answer else None)

    async def question_rows(self, where: QuestionFilter, limit: int) -> list[QuestionRow]:
        clauses, args = equal(where, QUESTION_COLUMNS, self.mark)
        sql = (f"SELECT {ROW_COLUMNS} FROM elicitations" + (" WHERE " + " AND ".join(clauses) if clauses else "")
               + f" ORDER BY created, {self.INSERTED} LIMIT {self.mark}")
        return [QuestionRow(*row) for row in await self._rows(sql, (*args, limit))]

    async def count(self, state: State) -> int:
        rows = await self._rows(self.sql("SELECT COUNT(*) FROM elicitations WHERE state=?"), (state,))
        return int(rows[0][0])

    async def audit(self, where: AuditFilter, limit: int) -> list[AuditRecord]:
        sql, args = audit_where(where, self.mark)
        rows = await self._rows(f"SELECT seq, doc FROM audit WHERE {sql} ORDER BY seq LIMIT {self.mark}",
                                (*args, limit))
        return [record_of(int(seq), doc) for seq, doc in rows]

    async def last_seq(self) -> int:
        rows = await self._rows("SELECT COALESCE(MAX(seq), 0) FROM audit")
        return int(rows[0][0])

    async def task(self, tid: str) -> StoredTask | None:
        rows = await self._rows(self.sql("SELECT doc FROM tasks WHERE id=?"), (tid,))
        return StoredTask.model_validate_json(rows[0][0]) if rows else None

    async def fact(self, key: str) -> Any:
        rows = await self._rows(self.sql("SELECT value FROM facts WHERE key=?"), (key,))
        return json.loads(rows[0][0]) if rows else None

    async def passkeys(self, person: str | None = None) -> list[Passkey]:
        where, args = (" WHERE person=?", (person,)) if person is not None else ("", ())
        rows = await self._rows(self.sql(f"SELECT {PASSKEY_COLUMNS} FROM passkeys{where} ORDER BY person, created"),
                                args)
        return [passkey_of(row) for row in rows]
