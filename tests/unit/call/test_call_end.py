"""A call's end as the store keeps it, on a real broker and SQLite file.

- Its row, built without a model (`Call.stored_row`, written for every plain call that ends), is the row the model
  gives (`documents.task_row(call.stored())`), byte for byte, whatever the call holds: what a restart re-drives from
  and `mcpx task result` reads back is the same either way.
- The ends of calls nobody waits on (plain calls) ride together: one unit writes each one's row and task.done, in
  the order they ended, with the next commit that cannot wait; nothing of them is on disk before, and an end that
  comes once they committed rides with the next.
- Their task.done records, built without a model encoded (`writes.done_doc`, `store.TaskDones`) and written in one
  statement, are the records the log holds: the same document as the model's, byte for byte, and each published
  with the seq of its own row, after other records and beside other units, on SQLite and on PostgreSQL.
- On SQLite, where they commit off the loop, their records are made only if someone is to hear of them (the bus's
  `hears`), asked there and again on the loop once they committed: nobody, and none is made nor published (the log
  holds them all the same, numbered in turn); somebody by then, and each is handed on in its place in the log.
- A plain call that ended on the lean path lets go of whoever heard its end and of what its kind sent (they hold it:
  no cycle is left behind each call for the collector).
- A moment written without a datetime (`rfc3339_epoch`: the row's created and updated, the record's at) is the text
  `rfc3339` writes of the datetime, whatever its fraction rounds to.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import FixedConfig
from mcpx.broker.broker import Broker
from mcpx.broker.documents import audit_doc, task_row
from mcpx.broker.models import AuditRecord, Elicitation, OpenRequest, StoredTask, rfc3339, rfc3339_epoch
from mcpx.broker.sqlite import SqliteStore
from mcpx.broker.store import AuditFilter, Identity, Store, TaskDones
from mcpx.broker.writes import Writes, _ms, done_doc
from mcpx.call.lean import LeanCall
from mcpx.call.lifecycle import Calls
from mcpx.call.record import Call
from mcpx.call.request import CallRequest
from mcpx.config.models import Config
from mcpx.shared import wirejson


def _same(call: Call) -> None:
    row = call.stored_row()
    assert row == task_row(call.stored())
    # the model made of the call's own values (`Call.stored`, not validated) is the validated one: fields, fields set
    stored = call.stored()
    validated = StoredTask(**{name: getattr(stored, name) for name in stored.model_fields_set})
    assert stored == validated
    assert list(stored.__dict__) == list(validated.__dict__)
    assert stored.model_fields_set == validated.model_fields_set
    assert wirejson.encode_models(stored) == wirejson.encode_models(validated)


def test_a_plain_call_that_completed() -> None:
    call = Call("tsk-0123456789abcdef", "cal-0123456789abcdef",
                CallRequest("peer", "echo", {"text": "héllo", "n": 1.5e-7, "none": None}, "s1", "fallback",
                            surface="mcp", cwd="/work"))
    call.connected("legacy")
    call.ended("completed", {"content": [{"type": "text", "text": "héllo"}], "isError": False,
                             "structuredContent": {"kept": None, "deep": [None, {"x": None}]}})
    _same(call)
    assert StoredTask.model_validate_json(call.stored_row().doc).result == call.result  # and it reads back


def test_a_call_with_everything_a_row_may_hold() -> None:
    call = Call("tsk-00000000000000aa", "cal-00000000000000aa",
                CallRequest("issues", "create", {"token": "s3cret", "odd": "\udfff"}, "s2", "argument",
                            parent="tsk-00000000000000bb", surface="rest", policy_mode="auto", transparent=True,
                            era="modern", client_caps={"roots": {}, "echo": "s3cret"}),
                questions=["elc-0000000000000001"], remembered={"round": 2, "requestState": "abc"})
    call.handed_secret("s3cret")
    call.connected("modern")
    _same(call)  # running, remembered: what a restart re-drives from
    call.ended("failed", None, "the server said s3cret \udfff")
    _same(call)
    assert "s3cret" not in call.stored_row().doc


def test_a_transparent_call_without_an_era() -> None:
    call = Call("tsk-00000000000000cc", "cal-00000000000000cc",
                CallRequest("fs", "read", {}, "s3", "meta", transparent=True))
    call.ended("cancelled", None, "cancelled by the MCP client")
    _same(call)


async def test_a_plain_call_that_ended_lean_is_recorded_and_read_as_its_call_would_be(broker: Broker) -> None:
    """A plain call that ended on the lean path with no `Call` made (call/lean.py) is recorded from its own fields:
    its row is the row its `Call` would give, byte for byte, and the `Call` made when a door reads it afterwards
    (`Calls.made`) is that call, ended: the same row, result, times and era."""
    calls = Calls(broker, FixedConfig(Config()), _never, _never)
    lean = calls.leaning(CallRequest("peer", "echo", {"text": "héllo", "none": None}, "s1", "fallback",
                                     surface="mcp", cwd="/work", era="legacy"))
    lean.era = "modern"  # its connection's (LeanCall.sent)
    lean.result, lean.ended_at = {"content": [{"type": "text", "text": "héllo"}], "isError": False}, lean.created + 1
    call = Call(lean.id, lean.trace, lean.request, state="completed", era="modern", created=lean.created,
                result=lean.result, updated=lean.ended_at)
    assert lean.stored_row() == call.stored_row() == task_row(call.stored())  # the validated model's, too
    read = calls.made(lean)
    assert (read.state, read.result, read.era, read.created, read.updated) == (
        "completed", lean.result, "modern", lean.created, lean.ended_at)
    assert read.stored_row() == lean.stored_row() and calls.get(lean.id) is read


class _Sent:
    """What a kind hands the lean path once a call's request is written (call/lean.py's `SentCall`), as the MCP kind's
    `LeanSend` is made: holding its `LeanCall`; its reply told by `reply`."""

    def __init__(self, lean: LeanCall) -> None:
        self.lean, self.era, self.due = lean, "legacy", asyncio.get_running_loop().time() + 60
        self.heard: Callable[[], None] | None = None
        self.result: dict[str, Any] | None = None

    def when_replied(self, heard: Callable[[], None]) -> None:
        self.heard = heard

    def plain(self) -> dict[str, Any] | None:
        return self.result

    def taken_on(self, call: Call) -> Awaitable[dict[str, Any]]:
        raise AssertionError("a call that ends plainly is not taken on")

    def reply(self, result: dict[str, Any]) -> None:
        assert self.heard is not None
        self.result = result
        self.heard()


class _Caller:
    """Whoever hears how a lean call left the lean path, holding it as surface/plain_call.py's `PlainCall` does."""

    def __init__(self, lean: LeanCall) -> None:
        self.lean = lean
        self.told: list[dict[str, Any] | None] = []

    def settled(self, _lean: LeanCall, result: dict[str, Any] | None) -> None:
        self.told.append(result)


async def test_a_plain_call_that_ended_lean_lets_go_of_its_caller_and_of_what_was_sent(broker: Broker) -> None:
    """A lean call holds whoever hears of its end and what its kind sent until it ended, and no longer: they hold it
    too, and a cycle left behind every plain call fills the collector's youngest generation (its collections were
    ~3% of the daemon's instructions a plain call, bench/call_cost.py --instructions). The call itself is kept until
    its end is stored (`Calls`)."""
    calls = Calls(broker, FixedConfig(Config()), _never, _never)
    lean = calls.leaning(CallRequest("peer", "echo", {"text": "hi"}, "s1", "fallback", surface="mcp"))
    caller, sent = _Caller(lean), _Sent(lean)
    calls.lean(lean, sent, caller.settled)
    gone = [weakref.ref(caller), weakref.ref(sent)]
    result = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    sent.reply(result)
    assert caller.told == [result] and lean.result == result and calls.get(lean.id).state == "completed"
    del caller, sent
    assert [ref() for ref in gone] == [None, None]  # freed as their last reference went, with no collection


async def _never(_call: Call) -> dict[str, Any]:
    raise AssertionError("no call runs here")


def _ended(n: int) -> Call:
    call = Call(f"tsk-{n:016x}", f"cal-{n:016x}", CallRequest("peer", "echo", {"n": n}, "s1", "fallback"))
    call.connected("legacy")
    call.ended("completed", {"content": [{"type": "text", "text": str(n)}]})
    return call


def _on_disk(path: Path) -> tuple[list[tuple[str, str]], list[tuple[str | None, str]]]:
    """The tasks and the audit's (task, kind) as another process reading the file finds them."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return (db.execute("SELECT id, doc FROM tasks ORDER BY rowid").fetchall(),
                db.execute("SELECT task, kind FROM audit ORDER BY seq").fetchall())
    finally:
        db.close()


async def test_the_ends_of_plain_calls_ride_together_with_the_next_commit(broker: Broker, tmp_path: Path) -> None:
    calls = [_ended(n) for n in range(3)]
    with broker.bus.subscribe() as heard:
        ends = [broker.finish_task(c.stored_row, {"state": "completed", "server": "peer", "tool": "echo"}, tid=c.id,
                                   session="s1", trace=c.trace, behind=True) for c in calls]
        assert ends[0] is ends[1] is ends[2] and not ends[0].done()
        assert _on_disk(tmp_path / "mcpx.db") == ([], [])  # nothing yet: they wait for company (or their horizon)
        await broker.open(OpenRequest(session="s1", session_source="fallback", server="peer",
                                      message="a question that cannot wait", ttl=60))
        assert ends[0].done() and ends[0].result() == 3
        tasks, audit = _on_disk(tmp_path / "mcpx.db")
        assert tasks == [(c.id, c.stored_row().doc) for c in calls]
        assert audit == [*((c.id, "task.done") for c in calls), (None, "elicit.open")]
        published = [heard.queue.get_nowait() for _ in range(4)]
        assert [(r.kind, r.task, r.data["state"]) for r in published[:3]] == [
            ("task.done", c.id, "completed") for c in calls]
        assert [r.seq for r in published] == sorted(r.seq for r in published)
    assert (await broker.task(calls[1].id)) == StoredTask.model_validate_json(calls[1].stored_row().doc)

    later = _ended(9)
    end = broker.finish_task(later.stored_row, {"state": "completed"}, tid=later.id, session="s1",
                             trace=later.trace, behind=True)
    assert end is not ends[0] and not end.done()  # the next commit's


def test_a_task_done_document_is_the_models() -> None:
    now = 1_765_000_000.9999996  # its microsecond rounds up into the next second
    for data, trace in (({"state": "completed", "server": "peer", "tool": "echo"}, "cal-00000000000000aa"),
                        ({"state": "failed", "error": "the server said \udfff", "deep": [None, {"x": None}]}, None)):
        doc = done_doc(rfc3339_epoch(now), data, "s1", trace, "tsk-00000000000000aa", 4242)
        dones = TaskDones(_ms(now), 4242, [(_no_row, data, "s1", trace, "tsk-00000000000000aa")], [doc], None)
        record = dones.record(0)
        assert doc == audit_doc(record)
        # made without validation (`AuditRecord.task_done`): what the validating constructor makes, fields, fields
        # set, private attributes, JSON, and a copy of it
        validated = AuditRecord(seq=0, at=_ms(now), kind="task.done", session="s1", trace=trace,
                                task="tsk-00000000000000aa", pid=4242, data=data)
        assert record == validated
        assert record.model_fields_set == validated.model_fields_set
        assert record.json_bytes() == validated.json_bytes()
        assert record.numbered(7, doc).json_bytes() == validated.model_copy(update={"seq": 7}).json_bytes()
        assert record.model_copy(update={"seq": 8}) == validated.model_copy(update={"seq": 8})


def _no_row() -> Any:
    raise AssertionError("no row is written here")


def test_a_moment_without_a_datetime_is_rfc3339s() -> None:
    seconds = (0, 1_765_000_000, 1_765_000_059, 4_102_444_799)
    fractions = (0.0, 0.0005, 0.0004995, 0.0009995, 0.1234565, 0.999, 0.9994999, 0.9995, 0.9999994, 0.9999995,
                 0.99999949)
    for epoch in (s + f for s in seconds for f in fractions):
        assert rfc3339_epoch(epoch) == rfc3339(datetime.fromtimestamp(epoch, UTC)), epoch
    for micro in range(999_990, 1_000_000):  # halves of a microsecond, at the second's end: rounded to even
        epoch = (1_765_000_000 * 1_000_000 + micro + 0.5) / 1e6
        assert rfc3339_epoch(epoch) == rfc3339(datetime.fromtimestamp(epoch, UTC)), epoch


@pytest.fixture(params=["sqlite", "postgresql"])
async def either_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store
    if request.param == "sqlite":
        made = SqliteStore(tmp_path / "mcpx.db")
    else:
        from mcpx.broker.postgres import PgStore

        pg = request.getfixturevalue("postgres")
        dsn = pg.create_database(f"ends_{secrets.token_hex(6)}")
        made = PgStore(dsn, Identity(id="dmn-00000000000000aa", user="u", host="h", pid=os.getpid(), version="0"))
    await made.open()
    try:
        yield made
    finally:
        await made.close()


async def test_the_ends_are_numbered_as_the_log_holds_them(either_store: Store) -> None:
    store = either_store
    broker = Broker(store, FixedConfig(Config()))
    await broker.start()
    try:
        with broker.bus.subscribe() as heard:
            request = OpenRequest(session="s1", session_source="fallback", server="peer", message="a question",
                                  ttl=60)
            await broker.open(request)  # the log does not start with them
            calls = [_ended(n) for n in range(5)]
            data = {"state": "completed", "server": "peer", "tool": "echo"}
            ends: list[Any] = [broker.finish_task(c.stored_row, data, tid=c.id, session="s1", trace=c.trace,
                                                  behind=True) for c in calls]
            await broker.open(request)  # a unit beside them in their commit, after them
            assert all(e.done() and e.result() == 5 for e in ends)
            published = [heard.queue.get_nowait() for _ in range(7)]
            assert heard.queue.empty()
        logged = await store.audit(AuditFilter(), 100)
        # what was published is what the log holds, each record with its own row's seq and document
        assert [(r.seq, r.json_bytes()) for r in published] == [
            (r.seq, r.model_copy().json_bytes()) for r in logged]
        assert [r.task for r in published[1:6]] == [c.id for c in calls]
        assert [r.kind for r in published] == ["elicit.open", *["task.done"] * 5, "elicit.open"]
        for c in calls:
            assert (await store.task(c.id)) == StoredTask.model_validate_json(c.stored_row().doc)
    finally:
        await broker.stop()


async def _ends_heard(tmp_path: Path, heard: Any) -> tuple[list[AuditRecord], list[AuditRecord], list[Call]]:
    """Five plain calls' ends written by one unit (`Writes.end_call`, as the broker writes them) between two other
    records, on a SQLite store whose follower keeps what it is handed; `heard` says whether anyone hears a task.done.
    What was handed on, what the log holds, and the calls."""
    store = SqliteStore(tmp_path / "mcpx.db")
    handed: list[AuditRecord] = []
    store.follow(lambda records, _ours, _rows: handed.extend(records))
    await store.open()
    try:
        writes = Writes(store, 4242, None)
        await writes.submit_record("elicit.resumed", {"n": 1}, session="s1")
        calls = [_ended(n) for n in range(5)]
        ends = [writes.end_call(c.stored_row, {"state": "completed", "server": "peer", "tool": "echo"}, tid=c.id,
                                session="s1", trace=c.trace, within=60, heard=heard) for c in calls]
        assert all(e is ends[0] for e in ends)  # one unit for them all
        last = writes.submit_record("elicit.resumed", {"n": 2}, session="s1", within=60, waited=False)
        await store.close()  # commits what waits, in one batch (commits.CommitQueue.drain): off the loop
        assert ends[0].result() == 5 and last.done()
        reader = SqliteStore(tmp_path / "mcpx.db")
        await reader.open()
        try:
            logged = await reader.audit(AuditFilter(), 100)
            for c in calls:
                assert (await reader.task(c.id)) == StoredTask.model_validate_json(c.stored_row().doc)
        finally:
            await reader.close()
    finally:
        await store.close()
    assert [(r.kind, r.task) for r in logged] == [
        ("elicit.resumed", None), *(("task.done", c.id) for c in calls), ("elicit.resumed", None)]
    assert [r.seq for r in logged] == list(range(1, 8))
    for r in logged[1:6]:  # each row's document is the record's, as the model encodes it
        assert r.model_copy().json_bytes() == AuditRecord.model_validate(r.wire()).model_copy().json_bytes()
        assert (r.session, r.trace, r.pid, r.data["state"]) == ("s1", f"cal-{r.task[4:]}", 4242, "completed")
    return handed, logged, calls


async def test_the_ends_nobody_hears_are_logged_but_never_made(tmp_path: Path) -> None:
    asked: list[bool] = []

    def nobody(kind: str) -> bool:
        assert kind == "task.done"
        asked.append(True)
        return False

    handed, _logged, _calls = await _ends_heard(tmp_path, nobody)
    assert len(asked) == 2  # where they were written, and on the loop once committed
    assert [(r.seq, r.kind) for r in handed] == [(1, "elicit.resumed"), (7, "elicit.resumed")]


async def test_the_ends_someone_hears_by_the_time_they_committed_are_handed_on_in_their_place(
        tmp_path: Path) -> None:
    asked: list[bool] = []

    def came_meanwhile(kind: str) -> bool:
        asked.append(True)
        return len(asked) > 1  # nobody where they were written; somebody once they committed

    handed, logged, _calls = await _ends_heard(tmp_path, came_meanwhile)
    assert len(asked) == 2
    assert [(r.seq, r.json_bytes()) for r in handed] == [(r.seq, r.model_copy().json_bytes()) for r in logged]
    assert handed[1].model_fields_set == logged[1].model_fields_set  # as the validated model's


async def test_the_ends_someone_hears_are_made_where_they_are_written(tmp_path: Path) -> None:
    handed, logged, _calls = await _ends_heard(tmp_path, lambda _kind: True)
    assert [(r.seq, r.json_bytes()) for r in handed] == [(r.seq, r.model_copy().json_bytes()) for r in logged]


def test_the_call_stored_with_its_question_is_the_call_stored_then_updated() -> None:
    """`Call.stored_with` (a legacy question's commit stores the call so) makes one model of the call's values with the
    question's changes: the model `stored()` gives, updated with them, to the field, the fields set and the bytes."""
    now = datetime.now(UTC)
    q = Elicitation(id="elc-00000000000000dd", session="s4", session_source="argument", server="issues",
                    mode="form", message="Which repository?", audience="agent", reason="a choice", created=now,
                    expires_at=now, state="pending")
    call = Call("tsk-00000000000000dd", "cal-00000000000000dd",
                CallRequest("issues", "create", {"token": "s3cret"}, "s4", "argument", transparent=True,
                            era="legacy", client_caps={"echo": "s3cret"}),
                questions=["elc-00000000000000ee", q.id])
    call.handed_secret("s3cret")
    call.connected("legacy")
    for pending, remembered in ((True, None), (False, {"round": 1}), (True, {"task": "t-1"})):
        stored = call.stored()
        update: dict[str, Any] = {"questions": [*(e for e in stored.questions if e != q.id), q.id]}
        if pending:
            update.update({"open": [*(e for e in stored.open if e != q.id), q.id], "state": "input-required"})
        if remembered is not None:
            update["resume"] = dict(remembered)
        expected = stored.model_copy(update=update)
        made_ = call.stored_with(q, pending, remembered)
        assert made_ == expected
        assert made_.model_fields_set == expected.model_fields_set
        assert wirejson.encode_models(made_) == wirejson.encode_models(expected)
        assert "s3cret" not in wirejson.encode_models(made_).decode()
