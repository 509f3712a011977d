"""A question's end is never lost, and nothing of it is kept after: on a real SQLite file, with the database's write
lock held by another process as a busy machine or a long backup would hold it.

- An expiry whose write failed (the lock held past the store's patience) is retried: the deadline goes back on
  the sweeper's heap, and the question expires once the lock is free, not at the next restart.
- A record whose commit was cancelled resolves its own future (with the cancellation), instead of raising inside
  the callback and leaving whoever awaits it waiting forever.
- An abandoned question leaves nothing behind in the broker's memory of what it asked.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import pytest

from mcpx.broker.broker import Broker
from mcpx.broker.errors import QuestionEnded
from mcpx.broker.models import OpenRequest
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
