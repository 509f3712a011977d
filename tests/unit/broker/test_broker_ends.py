"""A question's end is never lost, and nothing of it is kept after: on a real SQLite file, with the database's write
lock held by another process as a busy machine or a long backup would hold it.

- An expiry whose write failed (the lock held past the store's patience) is retried: the deadline goes back on
  the sweeper's heap, and the question expires once the lock is free, not at the next restart.
- A record whose commit was cancelled resolves its own future (with the cancellation), instead of raising inside
  the callback and leaving whoever awaits it waiting forever.
- An abandoned question leaves nothing behind in the broker's memory of what it asked.
- A question whose opener is cancelled while it commits (its call ended) is ended once committed, not left pending
  with nobody to hear its answer; without anyone to end it, it is still swept at its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import pytest

from mcpx.broker.broker import Broker, Handle
from mcpx.broker.models import OpenRequest
from mcpx.broker.refusals import QuestionEnded
from mcpx.broker.store import QuestionFilter
from mcpx.broker.writes import RecordUnit

PATIENCE = 20.0  # bounds the waits; each ends with an event
REPO = {"type": "object", "properties": {"repo": {"type": "string"}}}


async def test_an_expiry_whose_write_failed_is_retried_once_the_database_is_free(
        broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    handle = await broker.open(OpenRequest(session="s", session_source="argument", server="srv",
                                           message="which repository?", requested_schema=REPO, ttl=0.5))
    held = sqlite3.connect(tmp_path / "mcpx.db", isolation_level=None)
    held.execute("BEGIN IMMEDIATE")  # another process holds the write lock across the question's deadline
    try:
        with caplog.at_level(logging.ERROR, logger="mcpx.broker"):
            deadline = time.monotonic() + PATIENCE
            # the sweeper tries at the deadline, waits out the store's patience (5 s), and says it failed
            while not any("expiring questions failed" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the sweeper never tried to expire it"
                await asyncio.sleep(0.05)
        q, _ = await broker.get(handle.id)
        assert q.state == "pending", "nothing was written while the lock was held"
    finally:
        held.execute("COMMIT")
        held.close()
    answer = await asyncio.wait_for(broker.wait(handle.id, PATIENCE), PATIENCE)
    assert answer is not None and (answer.action, answer.by) == ("cancel", "expiry")
    q, _ = await broker.get(handle.id)
    assert q.state == "expired"


async def test_a_record_whose_commit_was_cancelled_resolves_with_the_cancellation(broker: Broker) -> None:
    unit = RecordUnit(broker._writes, "elicit.shown", {"where": "x"}, "elc-0123456789abcdef", "s", None, None, None,
                      None)
    commit: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    commit.add_done_callback(unit.published)
    commit.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(unit.recorded, PATIENCE)


async def test_an_abandoned_question_leaves_nothing_of_it_in_the_broker(broker: Broker) -> None:
    handle = await broker.open(OpenRequest(session="s", session_source="argument", server="srv",
                                           message="paste your token",
                                           requested_schema={"type": "object",
                                                             "properties": {"api_token": {"type": "string"}}}))
    waiting = asyncio.ensure_future(handle.answer())
    broker._waiters.asked.add(handle.id)  # as a daemon of a team marks the credential questions it asked
    assert await broker.abandon(handle.id, "the call went away")
    with pytest.raises(QuestionEnded):
        await asyncio.wait_for(waiting, PATIENCE)
    assert handle.id not in broker._waiters.asked and handle.id not in broker._waiters


async def test_a_question_whose_opener_is_cancelled_while_it_commits_is_ended_once_committed(broker: Broker) -> None:
    """Broker.open runs in its asker's own step (upstream/mcp_call.py: no task between the server's request and its
    client's): a cancel of that asker while the question commits cannot take the commit back. The question, once
    committed, is handed to `left`, which ends it, and the cancel goes on. An opener that gave no `left` (a /v1 POST
    whose client went away) leaves a question that still expires at its deadline, not one pending for good."""
    openers: list[asyncio.Future[Handle]] = []
    ended: list[Handle] = []

    async def cancelled_as_it_commits(_handle: Handle) -> None:
        openers[-1].cancel()  # lands at the opener's next wait: its question's commit, queued once this returns

    async def left(handle: Handle) -> None:
        ended.append(handle)
        await broker.abandon(handle.id, "its call ended while it was being stored")

    def request() -> OpenRequest:
        return OpenRequest(session="s", session_source="argument", server="srv", message="which repository?",
                           requested_schema=REPO, ttl=60)

    openers.append(asyncio.ensure_future(broker.open(request(), committing=cancelled_as_it_commits, left=left)))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(openers[-1], PATIENCE)
    assert len(ended) == 1
    q, answer = await broker.get(ended[0].id)
    assert q.state == "abandoned" and answer is None
    assert q.state_reason == "its call ended while it was being stored"

    openers.append(asyncio.ensure_future(broker.open(request(), committing=cancelled_as_it_commits)))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(openers[-1], PATIENCE)
    (left_pending,) = await broker.questions(QuestionFilter(state="pending"))
    assert await broker.expire_due(time.time() + 120) == 1  # its deadline was put on the sweeper's heap
    q, answer = await broker.get(left_pending.id)
    assert q.state == "expired" and answer is not None and answer.by == "expiry"


async def test_a_long_poll_ends_at_its_timeout_at_a_stop_or_cancelled_and_leaves_the_askers_future_as_it_was(
        broker: Broker) -> None:
    """Broker.wait's own wait (`_first`, not asyncio.wait): None at the timeout or once `stop` is done, the answer
    once committed; its callbacks come off the asker's future however it ends, and it never touches its result."""
    handle = await broker.open(OpenRequest(session="s", session_source="argument", server="srv",
                                           message="which repository?", requested_schema=REPO))
    shared = broker._waiters.get(handle.id)
    assert shared is not None
    callbacks = len(shared._callbacks)  # type: ignore[attr-defined]
    assert await asyncio.wait_for(broker.wait(handle.id, 0.05), PATIENCE) is None
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stopped = asyncio.ensure_future(broker.wait(handle.id, PATIENCE, stop))
    cancelled = asyncio.ensure_future(broker.wait(handle.id, PATIENCE))
    await asyncio.sleep(0)  # both are waiting on the asker's future
    assert len(shared._callbacks) == callbacks + 2  # type: ignore[attr-defined]
    stop.set_result(None)
    assert await asyncio.wait_for(stopped, PATIENCE) is None
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert len(shared._callbacks) == callbacks and not shared.done()  # type: ignore[attr-defined]
    polling = asyncio.ensure_future(broker.wait(handle.id, PATIENCE))
    await asyncio.sleep(0)
    await broker.answer(handle.id, "accept", {"repo": "me/thing"}, by="person:cli")
    answer = await asyncio.wait_for(polling, PATIENCE)
    assert answer is not None and answer.content == {"repo": "me/thing"}
