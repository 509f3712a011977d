"""The broker's parts on their own: the waiters and their futures, and the sweeper that owns the deadlines.

The broker's own tests (test_broker_ends.py, test_answer_first.py, test_commits.py) run them together on a real
store; here each is held to its word with nothing around it. Every wait is bounded and ends with an event.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from mcpx.broker import rules
from mcpx.broker.models import Answer, Elicitation, OpenRequest
from mcpx.broker.refusals import Gone, QuestionEnded
from mcpx.broker.sweeper import Sweeper
from mcpx.broker.waiters import Handle, Waiters

PATIENCE = 10.0
EID = "elc-0123456789abcdef"


def question() -> Elicitation:
    req = OpenRequest(session="s", session_source="argument", server="srv", message="which?")
    return rules.question_of(req, 0, 60)[0].model_copy(update={"id": EID})


def answer(action: str = "accept") -> Answer:
    return Answer(id=EID, action=action, by="person:cli", at=rules.ts(0), answered_after_ms=0)  # type: ignore[arg-type]


async def test_a_wake_tells_the_asker_and_the_long_polls_and_forgets_the_question() -> None:
    waiters = Waiters(solo=True)
    shared = waiters.future_for(EID)
    waiters.asked.add(EID)
    asking = asyncio.ensure_future(Handle(question(), shared).answer())
    given = answer()
    waiters.wake(EID, given)
    assert await asyncio.wait_for(asking, PATIENCE) is given
    assert Waiters.told(shared) is given  # what a long poll on the shared future reads
    assert EID not in waiters and EID not in waiters.asked


async def test_an_ended_question_is_gone_to_a_long_poll_and_ended_to_its_asker() -> None:
    waiters = Waiters(solo=True)
    shared = waiters.future_for(EID)
    own = asyncio.ensure_future(Handle(question(), shared).answer())
    waiters.end(EID, "the call went away")
    with pytest.raises(QuestionEnded):
        await asyncio.wait_for(own, PATIENCE)
    with pytest.raises(Gone, match="the call went away"):
        Waiters.told(shared)


async def test_an_end_for_a_future_that_is_no_longer_the_questions_tells_nobody() -> None:
    waiters = Waiters(solo=True)
    first = waiters.future_for(EID)
    waiters.drop(EID)
    waiters.future_for(EID)
    waiters.end(EID, "could not be stored", told=first)
    assert not first.done()


async def test_an_eager_asker_is_told_first_only_on_a_store_this_daemon_alone_writes() -> None:
    team = Waiters(solo=False)
    assert team.eager_asker(EID, team.future_for(EID), eager=True) is None
    solo = Waiters(solo=True)
    shared = solo.future_for(EID)
    mine = solo.eager_asker(EID, shared, eager=True)
    assert mine is not None and solo.eager(EID) is mine
    given = answer("decline")
    mine.set_result(given)  # told first, before the commit
    await asyncio.sleep(0)  # the done callback that retires it runs in the next loop turn
    assert solo.eager(EID) is None
    solo.wake(EID, answer())  # the committed answer later reaches the long polls, not the asker again
    assert mine.result() is given


async def test_the_sweeper_expires_what_is_due_and_puts_back_what_it_could_not_write() -> None:
    calls: list[list[str]] = []
    failing = True

    async def expire(due: list[str], now: float) -> int:
        calls.append(due)
        if failing:
            raise RuntimeError("the store is busy")
        return len(due)

    sweeper = Sweeper(expire)
    sweeper.fill([(5.0, "elc-a"), (20.0, "elc-c")])
    sweeper.due(10.0, "elc-b")
    assert await sweeper.expire_due(1.0) == 0 and calls == []
    with pytest.raises(RuntimeError):
        await sweeper.expire_due(15.0)
    failing = False
    assert await sweeper.expire_due(15.0) == 2
    assert calls == [["elc-a", "elc-b"], ["elc-a", "elc-b"]]
    assert await sweeper.expire_due(15.0) == 0


async def test_the_sweeper_wakes_for_a_nearer_deadline_and_expires_it_on_its_own() -> None:
    expired: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

    async def expire(due: list[str], now: float) -> int:
        if not expired.done():
            expired.set_result(due)
        return len(due)

    sweeper = Sweeper(expire)
    sweeper.start()
    try:
        await asyncio.sleep(0)  # it looks once, finds nothing due, and sleeps on its longest wait
        sweeper.due(0.0, "elc-past")
        assert await asyncio.wait_for(expired, PATIENCE) == ["elc-past"]
    finally:
        await sweeper.stop()


async def test_the_sweeper_stops_when_a_deadline_comes_as_it_is_stopped() -> None:
    """A question opened as the daemon stops: the deadline wakes the sweeper in the very step its stop cancels it.
    The cancel wins (Python 3.11's wait_for would swallow it, and stop() would wait for the next deadline)."""
    async def expire(due: list[str], now: float) -> int:
        return 0

    sweeper = Sweeper(expire)
    sweeper.start()
    await asyncio.sleep(0)  # it looks once, finds nothing due, and sleeps on its longest wait
    sweeper.due(time.time() + 3600, "elc-later")
    await asyncio.wait_for(sweeper.stop(), PATIENCE)


def test_a_reply_shows_the_document_its_store_wrote_and_a_copy_is_encoded_afresh() -> None:
    from mcpx.broker.documents import row_of, stored_answer
    from mcpx.shared import wirejson

    q = question()
    given = answer()
    assert q.json_bytes() == wirejson.encode_models(q) and given.json_bytes() == wirejson.encode_models(given)
    row, doc = row_of(q), stored_answer(given)  # what a store's write encodes, kept on the object
    assert q.json_bytes() == wirejson.encode_models(q) == row.doc[:-1].encode() + b',"secondsLeft":0}'
    assert given.json_bytes() == wirejson.encode_models(given) == doc.encode()
    assert given == Answer.model_validate_json(doc)  # equal as before: the document kept is no part of the answer
    moved = q.model_copy(update={"state": "answered", "audience": "human"})  # a copy holds what the document may not
    assert moved.json_bytes() == wirejson.encode_models(moved) and b'"audience":"human"' in moved.json_bytes()
    changed = given.model_copy(update={"reason": "changed"})
    assert changed.json_bytes() == wirejson.encode_models(changed) and b'"changed"' in changed.json_bytes()
