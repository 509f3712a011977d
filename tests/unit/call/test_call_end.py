"""A call's end as the store keeps it, on a real broker and SQLite file.

- Its row, built without a model (`Call.stored_row`, written for every plain call that ends), is the row the model
  gives (`documents.task_row(call.stored())`), byte for byte, whatever the call holds: what a restart re-drives from
  and `mcpx task result` reads back is the same either way.
- The ends of calls nobody waits on (plain calls) ride together: one unit writes each one's row and task.done, in
  the order they ended, with the next commit that cannot wait; nothing of them is on disk before, and an end that
  comes once they committed rides with the next.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcpx.broker.broker import Broker
from mcpx.broker.documents import task_row
from mcpx.broker.models import OpenRequest, StoredTask
from mcpx.call.record import Call
from mcpx.call.request import CallRequest


def _same(call: Call) -> None:
    row = call.stored_row()
    assert row == task_row(call.stored())


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
