"""An answer handed to its asker before it commits (Broker.answer's `_deliver_first`), on a real SQLite file.

Issue 14: no commit sits between an answer and a legacy server. A question opened `eager` (a legacy call's,
on a store this daemon alone writes) has its asker woken with the answer at once; whoever answered still hears
back only once the answer is stored, and the answer the asker got is the one the store ends up holding. Another
process holding the database's write lock keeps each commit waiting (on the store's thread, with the loop free),
so what happens before the commit can be seen.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mcpx.broker.broker import Broker, Handle
from mcpx.broker.models import OpenRequest
from mcpx.broker.refusals import Gone, QuestionEnded
from mcpx.broker.store import AuditFilter, QuestionFilter

PATIENCE = 10.0  # no wait here is for time: each ends with an event, this only bounds it
REPO = {"type": "object", "properties": {"repo": {"type": "string"}}}


class Held:
    """The database's write lock, held as another process would hold it; reads through it see what is committed."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("BEGIN IMMEDIATE")

    def state(self, eid: str) -> str:
        return str(self.db.execute("SELECT state FROM elicitations WHERE id=?", (eid,)).fetchone()[0])

    def release(self) -> None:
        self.db.execute("COMMIT")
        self.db.close()


async def ask(broker: Broker, eager: bool) -> Handle:
    return await asyncio.wait_for(broker.open(OpenRequest(
        session="s", session_source="argument", server="srv", message="which repository?",
        requested_schema=REPO), eager=eager), PATIENCE)


async def test_an_eager_asker_has_its_answer_before_the_store_and_the_answerer_after(
        broker: Broker, tmp_path: Path) -> None:
    handle = await ask(broker, eager=True)
    held = Held(tmp_path / "mcpx.db")
    try:
        answering = asyncio.ensure_future(broker.answer(handle.id, "accept", {"repo": "a/b"}, by="human"))
        got = await asyncio.wait_for(handle.answer(), PATIENCE)  # the commit cannot have happened: the lock is held
        assert (got.action, got.content) == ("accept", {"repo": "a/b"})
        assert held.state(handle.id) == "pending" and not answering.done()  # nobody was told it is stored
    finally:
        held.release()
    q, answer = await asyncio.wait_for(answering, PATIENCE)
    assert q.state == "answered" and answer is not None and answer.content == {"repo": "a/b"}
    stored = await asyncio.wait_for(broker.wait(handle.id, PATIENCE), PATIENCE)  # a long poll: the stored copy
    assert stored is not None and stored.content == {"repo": "a/b"} and stored.at == answer.at


async def test_an_eager_asker_passes_its_answer_on_before_it_is_told_and_before_the_store(
        broker: Broker, tmp_path: Path) -> None:
    """Broker.hand_first (a legacy server's reply written from the step the answer is taken in, upstream/mcp_call.py):
    the hand has the answer's words, as checked, before the asker's own future is told and before the store; an
    answer that is refused reaches no hand, and a hand taken back hears nothing."""
    handle = await ask(broker, eager=True)
    passed: list[tuple[Any, ...]] = []
    broker.hand_first(handle.id, lambda action, content, reason: passed.append((action, content, handle.done())))
    with pytest.raises(Exception, match="repo"):
        await broker.answer(handle.id, "accept", {"repo": 7}, by="human")  # does not fit the form: refused
    assert passed == []
    held = Held(tmp_path / "mcpx.db")
    try:
        answering = asyncio.ensure_future(broker.answer(handle.id, "accept", {"repo": "a/b"}, by="human"))
        got = await asyncio.wait_for(handle.answer(), PATIENCE)
        assert passed == [("accept", {"repo": "a/b"}, False)]  # before its asker was told
        assert got.content == {"repo": "a/b"} and held.state(handle.id) == "pending"
    finally:
        held.release()
    assert (await asyncio.wait_for(answering, PATIENCE))[0].state == "answered"
    other = await ask(broker, eager=True)
    broker.hand_first(other.id, lambda *words: passed.append(words))
    broker.hand_first(other.id, None)
    await asyncio.wait_for(broker.answer(other.id, "decline", by="human"), PATIENCE)
    assert (await asyncio.wait_for(other.answer(), PATIENCE)).action == "decline" and len(passed) == 1


async def test_a_clients_answer_handed_over_in_its_step_or_left_to_answer_with_nothing_done(
        broker: Broker, tmp_path: Path) -> None:
    """Broker.hand_over (the call's own client's reply, taken in the turn it is read: surface/driver.py): an eager
    asker has the answer at once, before the store, and the answer commits behind it; an answer that does not fit,
    or a question with no eager asker, is left to `answer` with nothing done, which then says why."""
    handle = await ask(broker, eager=True)
    assert not broker.hand_over(handle.id, "accept", {"repo": 7}, by="person:mcp-client", session="s")
    assert not handle.done()
    with pytest.raises(Exception, match="repo"):
        await broker.answer(handle.id, "accept", {"repo": 7}, by="person:mcp-client", session="s")
    held = Held(tmp_path / "mcpx.db")
    try:
        assert broker.hand_over(handle.id, "accept", {"repo": "a/b"}, by="person:mcp-client", session="s")
        got = await asyncio.wait_for(handle.answer(), PATIENCE)
        assert got.content == {"repo": "a/b"} and held.state(handle.id) == "pending"
    finally:
        held.release()
    stored = await asyncio.wait_for(broker.wait(handle.id, PATIENCE), PATIENCE)  # once it committed
    assert stored is not None and stored.at == got.at and stored.by == "person:mcp-client"
    plain = await ask(broker, eager=False)
    assert not broker.hand_over(plain.id, "decline", None, by="person:mcp-client", session="s")
    assert not plain.done()


async def test_an_asker_not_eager_is_woken_only_by_the_commit(broker: Broker, tmp_path: Path) -> None:
    """A modern call's question (and mcpx's own confirmation): a restart re-drives it from what the store holds."""
    handle = await ask(broker, eager=False)
    held = Held(tmp_path / "mcpx.db")
    try:
        answering = asyncio.ensure_future(broker.answer(handle.id, "accept", {"repo": "a/b"}, by="human"))
        await asyncio.sleep(0)  # the answer's first step: it queues its unit, and hands nothing to the asker
        assert not handle.done() and not answering.done()
    finally:
        held.release()
    assert (await asyncio.wait_for(handle.answer(), PATIENCE)).content == {"repo": "a/b"}
    await asyncio.wait_for(answering, PATIENCE)


async def test_no_answer_is_handed_over_while_a_unit_that_may_end_the_question_is_queued(
        broker: Broker, tmp_path: Path) -> None:
    """The call ended (its question abandoned) a moment before the answer came: the abandon is queued, not yet
    committed. The answer must not reach the asker: the store will say abandoned, and the answerer hears so."""
    handle = await ask(broker, eager=True)
    held = Held(tmp_path / "mcpx.db")
    try:
        abandoning = asyncio.ensure_future(broker.abandon(handle.id, "the call ended"))
        await asyncio.sleep(0)  # the abandon's first step: its unit is queued
        answering = asyncio.ensure_future(broker.answer(handle.id, "accept", {"repo": "a/b"}, by="human"))
        await asyncio.sleep(0)
        assert not handle.done()
    finally:
        held.release()
    assert await asyncio.wait_for(abandoning, PATIENCE) is True
    with pytest.raises(Gone):
        await asyncio.wait_for(answering, PATIENCE)
    with pytest.raises(QuestionEnded):
        await asyncio.wait_for(handle.answer(), PATIENCE)


async def test_a_second_answer_loses_to_the_one_handed_over(broker: Broker, tmp_path: Path) -> None:
    handle = await ask(broker, eager=True)
    held = Held(tmp_path / "mcpx.db")
    try:
        first = asyncio.ensure_future(broker.answer(handle.id, "decline", by="human"))
        got = await asyncio.wait_for(handle.answer(), PATIENCE)
        second = asyncio.ensure_future(broker.answer(handle.id, "accept", {"repo": "x/y"}, by="human"))
    finally:
        held.release()
    assert got.action == "decline"
    q, _ = await asyncio.wait_for(first, PATIENCE)
    assert q.state == "answered"
    with pytest.raises(Exception, match="already answered"):
        await asyncio.wait_for(second, PATIENCE)
    _, stored = await broker.get(handle.id)
    assert stored is not None and stored.action == "decline"


async def test_an_answer_nobody_is_told_of_still_commits_and_wakes_the_long_polls(
        broker: Broker, tmp_path: Path) -> None:
    """`acknowledged=False` (an MCP client's reply to elicitation/create): the commit may wait for company, and a
    caller that stops waiting (the call's driver, as the call ends) takes nothing from it."""
    handle = await ask(broker, eager=True)
    polling = asyncio.ensure_future(broker.wait(handle.id, PATIENCE))
    answering = asyncio.ensure_future(broker.answer(handle.id, "accept", {"repo": "a/b"}, by="person:mcp-client",
                                                    acknowledged=False))
    assert (await asyncio.wait_for(handle.answer(), PATIENCE)).content == {"repo": "a/b"}
    answering.cancel()  # as the driver does when its call returns
    polled = await asyncio.wait_for(polling, PATIENCE)
    assert polled is not None and polled.content == {"repo": "a/b"}
    q, stored = await broker.get(handle.id)
    assert q.state == "answered" and stored is not None and stored.by == "person:mcp-client"


async def test_a_question_its_own_client_is_asked_first_rides_with_its_answer(broker: Broker, tmp_path: Path) -> None:
    """A legacy call's question whose own client is asked first (open's `committing`, eager): nothing of it is
    stored, listed or published until a commit that cannot wait comes (the call's end) or its horizon; the
    client's answer, given meanwhile, reaches the asker at once, and the question and its answer commit together,
    the question first. One that nobody answers is stored, listed and published at its horizon."""
    heard = broker.bus.subscribe()
    asked: list[str] = []

    async def committing(handle: Handle) -> None:
        asked.append(handle.id)

    def opening() -> Any:
        return broker.open(OpenRequest(session="s", session_source="argument", server="srv",
                                       message="which repository?", requested_schema=REPO),
                           committing=committing, eager=True)

    def on_disk(eid: str) -> list[tuple[str, ...]]:
        db = sqlite3.connect(tmp_path / "mcpx.db")
        try:
            return db.execute("SELECT state FROM elicitations WHERE id=?", (eid,)).fetchall()
        finally:
            db.close()

    handle = await asyncio.wait_for(opening(), PATIENCE)
    assert asked == [handle.id]
    assert await broker.questions(QuestionFilter(state="pending")) == [] and heard.queue.empty()
    answering = asyncio.ensure_future(broker.answer(handle.id, "accept", {"repo": "a/b"}, by="person:mcp-client",
                                                    acknowledged=False))
    got = await asyncio.wait_for(handle.answer(), PATIENCE)
    assert (got.action, got.content) == ("accept", {"repo": "a/b"})
    assert on_disk(handle.id) == [] and heard.queue.empty()  # the asker has it; the store nothing yet
    await asyncio.wait_for(broker.set_fact("the call's end", True), PATIENCE)  # a unit that cannot wait
    assert on_disk(handle.id) == [("answered",)]
    q, answer = await asyncio.wait_for(answering, PATIENCE)
    assert q.state == "answered" and answer is not None and answer.at == got.at
    records = await broker.audit(AuditFilter(elicit=handle.id))
    assert [r.kind for r in records] == ["elicit.open", "elicit.answered"]
    assert [heard.queue.get_nowait().kind for _ in range(2)] == ["elicit.open", "elicit.answered"]

    unanswered = await asyncio.wait_for(opening(), PATIENCE)
    opened = await asyncio.wait_for(heard.queue.get(), PATIENCE)  # at its horizon, alone
    assert (opened.kind, opened.elicit) == ("elicit.open", unanswered.id)
    assert [p.id for p in await broker.questions(QuestionFilter(state="pending"))] == [unanswered.id]
    assert on_disk(unanswered.id) == [("pending",)] and not unanswered.done()
