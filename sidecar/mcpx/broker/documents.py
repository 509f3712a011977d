"""How every store keeps the broker's models: a JSON document per row, beside the columns reads filter on.

Shared by the stores (broker/sqlite.py, broker/postgres.py) so a question, an answer or an audit
record reads back the same from either. `mark` is the driver's placeholder: `?` for sqlite3,
`%s` for psycopg.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from mcpx.broker.models import Answer, AuditRecord, Elicitation, State, StoredTask
from mcpx.broker.store import AuditFilter, QuestionFilter, QuestionRow, TaskRow
from mcpx.shared import wirejson

QUESTION_COLUMNS = ("state", "session", "server", "audience", "trace", "task")
# a QuestionRow's columns, in its order, for a SELECT
ROW_COLUMNS = ", ".join(QuestionRow._fields)


def dumps(value: Any) -> str:
    # never a UnicodeEncodeError at commit: a lone surrogate (in a tool's result, say) is kept as its escape
    return wirejson.dumps(value)


def document(model: BaseModel, exclude: set[str] | None = None) -> str:
    """A model's wire document, compact (wirejson.encode_models: it runs several times a question)."""
    return wirejson.encode_models(model, exclude).decode()


def stored_question(q: Elicitation) -> str:
    """A question's document as kept: secondsLeft is of the moment it is read, so it is never stored. Kept on `q`
    too, for a reply that shows it (Elicitation.json_bytes); the one `q` holds already if it has one (an answered
    question's, `Elicitation.in_state`)."""
    raw = q.doc()
    if raw is None:
        raw = wirejson.encode_models(q, {"seconds_left"})
        q.stored(raw)
    return raw.decode()


def stored_answer(answer: Answer) -> str:
    """An answer's document as kept, and on `answer`, for a reply that shows it (Answer.json_bytes)."""
    raw = wirejson.encode_models(answer)
    answer.stored(raw)
    return raw.decode()


def row_of(q: Elicitation) -> QuestionRow:
    """A question as a store keeps it: encoded here, once per write."""
    return QuestionRow(q.id, q.session, q.server, q.audience, q.state, q.created.timestamp(), q.expires_at.timestamp(),
                       q.trace, q.task, stored_question(q), q.approvals is not None)


def update_row(execute: Callable[[str, tuple[Any, ...]], Any], q: Elicitation, expect_state: State,
               mark: str = "?") -> QuestionRow | None:
    """Store `q` over its row if that is still in `expect_state`: the row as stored, or None if it was not."""
    row = row_of(q)
    cur = execute(f"UPDATE elicitations SET state={mark}, audience={mark}, doc={mark}, approvals={mark}"
                  f" WHERE id={mark} AND state={mark}",
                  (row.state, row.audience, row.doc, row.approvals, row.id, expect_state))
    return row if cur.rowcount == 1 else None


def task_row(task: StoredTask) -> TaskRow:
    """A task's row, its document by pydantic's encoder straight to JSON (not a dict dumped again: every call's end
    writes one, and this skips a whole copy; a float's exponent may be written shorter)."""
    return TaskRow(task.id, task.state, task.session, document(task))


def audit_doc(record: AuditRecord) -> str:
    """An audit record's document as kept: its seq is the row's own column."""
    return document(record, {"seq"})


def question_of(doc: str) -> Elicitation:
    return Elicitation.model_validate(json.loads(doc))


def answer_of(doc: str) -> Answer:
    return Answer.model_validate(json.loads(doc))


def record_of(seq: int, doc: str) -> AuditRecord:
    return AuditRecord.model_validate({**json.loads(doc), "seq": seq})


def equal(where: QuestionFilter | AuditFilter, columns: tuple[str, ...],
          mark: str = "?") -> tuple[list[str], list[Any]]:
    """`column=?` clauses, and their values, for the columns a filter names (None leaves one free)."""
    clauses: list[str] = []
    args: list[Any] = []
    for column in columns:
        value = getattr(where, column)
        if value is not None:
            clauses.append(f"{column}={mark}")
            args.append(value)
    return clauses, args


def audit_where(where: AuditFilter, mark: str = "?") -> tuple[str, list[Any]]:
    """The WHERE clause of an audit read, and its values: after a seq, by columns, of some kinds."""
    clauses, args = equal(where, ("elicit", "session", "trace", "task"), mark)
    clauses.insert(0, f"seq > {mark}")
    args.insert(0, where.after)
    if where.kinds:
        clauses.append("(" + " OR ".join(f"kind LIKE {mark}" for _ in where.kinds) + ")")
        args.extend(f"{k}.%" if "." not in k else k for k in where.kinds)
    return " AND ".join(clauses), args
