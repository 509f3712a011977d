"""The group commit's units that may wait (broker/commits.py), on a real SQLite store in a temporary file: they
ride with the next unit that cannot wait, or commit at their horizon, in the order submitted, and a close
commits them. The store's thread runs what it is handed in turn and hands back each outcome."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpx.broker import rules
from mcpx.broker.commits import rerun
from mcpx.broker.models import AuditRecord
from mcpx.broker.sqlite import SqliteStore
from mcpx.broker.store import AuditFilter
from mcpx.broker.store_thread import StoreThread

LONG = 3600.0  # a horizon no test waits for: what commits, commits for another reason


def facts_on_disk(path: Path) -> dict[str, str]:
    """What another process reading the file would find (what a kill -9 would leave)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return dict(db.execute("SELECT key, value FROM facts").fetchall())
    finally:
        db.close()


async def test_a_unit_that_may_wait_rides_with_the_next_that_cannot_in_order(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()
    try:
        waiting = store.submit(lambda tx: tx.put_fact("k", "first"), within=LONG)
        assert not waiting.done() and facts_on_disk(store.path) == {}
        await store.write(lambda tx: tx.put_fact("k", "second"))  # cannot wait: takes the waiting one along
        assert waiting.done() and facts_on_disk(store.path) == {"k": '"second"'}  # committed first, then over it
    finally:
        await store.close()


async def test_a_unit_that_may_wait_commits_at_its_horizon_alone_off_the_loop(tmp_path: Path) -> None:
    """Alone at its horizon nobody waits on its batch: it commits on the store's thread, its system calls keeping
    no reply waiting; a unit that cannot wait (and whatever rides with it) commits on the loop. A unit that commits
    at once but that no reply waits on (`waited` False: a call's end after its result) takes what rode until then
    off the loop with it (issue 39: a question's round trip, one commit after the reply, off the loop), unless a
    unit a reply waits on joins its batch."""
    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()
    threads: dict[str, int] = {}

    def put(key: str) -> Callable[[Any], None]:
        def unit(tx: Any) -> None:
            threads[key] = threading.get_ident()
            tx.put_fact(key, "yes")
        return unit

    try:
        await asyncio.wait_for(store.submit(put("alone"), within=0.01), timeout=10)
        assert facts_on_disk(store.path) == {"alone": '"yes"'}
        riding = store.submit(put("riding"), within=LONG)
        await store.write(put("urgent"))
        assert riding.done() and facts_on_disk(store.path) == {"alone": '"yes"', "riding": '"yes"', "urgent": '"yes"'}
        loop_thread = threading.get_ident()
        assert threads["alone"] != loop_thread
        assert threads["urgent"] == threads["riding"] == loop_thread

        question = store.submit(put("question"), within=LONG)
        end = store.submit(put("end"), waited=False)  # at once: no horizon is waited for
        await asyncio.wait_for(end, timeout=10)
        assert question.done() and facts_on_disk(store.path)["end"] == '"yes"'
        assert threads["question"] == threads["end"] != loop_thread

        aside, waited = store.submit(put("aside"), waited=False), store.submit(put("waited"))
        await asyncio.wait_for(asyncio.gather(aside, waited), timeout=10)  # one batch: a reply waits on it
        assert threads["aside"] == threads["waited"] == loop_thread
    finally:
        await store.close()


async def test_closing_the_store_commits_the_units_still_waiting(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()
    waiting = [store.submit(lambda tx, i=i: tx.put_fact(f"k{i}", i), within=LONG) for i in range(3)]
    await store.close()
    assert all(f.done() and f.exception() is None for f in waiting)
    assert facts_on_disk(tmp_path / "mcpx.db") == {"k0": "0", "k1": "1", "k2": "2"}


async def test_a_batch_that_finds_the_database_locked_waits_for_it_off_the_loop(tmp_path: Path) -> None:
    """Batches commit on the loop; one that finds another process holding the write lock waits for it on the
    store's thread (busy_timeout), while the loop goes on serving, and commits once the lock is let go."""
    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()
    other = sqlite3.connect(store.path, isolation_level=None)  # as another process would hold it
    try:
        other.execute("BEGIN IMMEDIATE")
        writing = asyncio.ensure_future(store.write(lambda tx: tx.put_fact("k", "after the lock")))
        for _ in range(5):  # the loop is not held: it comes back here while the batch waits
            await asyncio.sleep(0)
        assert not writing.done()
        other.execute("COMMIT")
        await asyncio.wait_for(writing, timeout=10)
        assert facts_on_disk(store.path) == {"k": '"after the lock"'}
    finally:
        other.close()
        await store.close()


async def test_a_unit_that_raises_takes_back_its_own_writes_alone_or_in_a_batch(tmp_path: Path) -> None:
    """A batch of one commits without savepoints (the whole transaction is that unit's); in a batch of several each
    unit has its own. Either way the unit's caller gets what it raised, and nothing it wrote stays."""
    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()

    def bad(tx: Any) -> None:
        tx.put_fact("bad", "written, then taken back")
        raise ValueError("the unit failed")

    try:
        with pytest.raises(ValueError, match="the unit failed"):
            await store.write(bad)  # alone in its batch
        assert facts_on_disk(store.path) == {}
        batch = [store.submit(lambda tx: tx.put_fact("a", 1)), store.submit(bad),
                 store.submit(lambda tx: tx.put_fact("b", 2))]  # queued in one loop turn: one batch
        outcomes = await asyncio.gather(*batch, return_exceptions=True)
        assert outcomes[0] is None and isinstance(outcomes[1], ValueError) and outcomes[2] is None
        assert facts_on_disk(store.path) == {"a": "1", "b": "2"}
        await store.write(lambda tx: tx.put_fact("c", 3))  # and the store goes on
        assert facts_on_disk(store.path) == {"a": "1", "b": "2", "c": "3"}
    finally:
        await store.close()


async def test_a_batch_of_units_that_may_run_again_commits_in_one_savepoint_and_one_that_raises_alone(
        tmp_path: Path) -> None:
    """Units marked `rerun` share one savepoint; if one raises, the batch runs again unit by unit: the one that raised
    takes back its own writes alone, the others commit once, each with its own audit record, numbered in turn."""
    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()
    runs: list[str] = []
    statements: list[str] = []

    def unit(name: str, fails: bool = False) -> Callable[[Any], int]:
        def write(tx: Any) -> int:
            runs.append(name)
            tx.put_fact(name, "written")
            seq = tx.audit(AuditRecord(seq=0, at=rules.ts(0), kind="elicit.shown", data={"by": name})).seq
            if fails:
                raise ValueError(f"{name} failed")
            return int(seq)
        return rerun(write)

    try:
        assert store._writer is not None
        store._writer.set_trace_callback(statements.append)
        heard: list[AuditRecord] = []
        store.follow(lambda records, *_: heard.extend(records))  # what is published once committed
        seqs = await asyncio.gather(store.submit(unit("a")), store.submit(unit("b")))
        assert runs == ["a", "b"] and seqs[1] == seqs[0] + 1
        assert [s for s in statements if "SAVEPOINT" in s] == ["SAVEPOINT batch", "RELEASE SAVEPOINT batch"]
        runs.clear()
        outcomes = await asyncio.gather(store.submit(unit("c")), store.submit(unit("d", fails=True)),
                                        store.submit(unit("e")), return_exceptions=True)
        assert runs == ["c", "d", "c", "d", "e"]  # once together until d raised, then each in its own savepoint
        assert isinstance(outcomes[1], ValueError) and outcomes[2] == outcomes[0] + 1 == seqs[1] + 2
        assert facts_on_disk(store.path) == {"a": '"written"', "b": '"written"', "c": '"written"', "e": '"written"'}
        records = await store.audit(AuditFilter(), 10)
        assert [r.data["by"] for r in records] == ["a", "b", "c", "e"]
        assert [r.seq for r in records] == [seqs[0], seqs[1], outcomes[0], outcomes[2]]
        assert [(r.seq, r.data["by"]) for r in heard] == [(r.seq, r.data["by"]) for r in records]
    finally:
        await store.close()


async def test_an_answer_that_comes_before_its_questions_commit_is_queued_commits_behind_it(tmp_path: Path) -> None:
    """A legacy call's own client is asked before the question's commit is queued (Broker.open's `committing`).
    Its answer may come back before that: it must wait for the question's commit to be queued and then win, not
    reach the store first and find no question. The client here answers at once and takes its time returning."""
    from dataclasses import dataclass

    from mcpx.broker.broker import Broker, Handle
    from mcpx.broker.models import OpenRequest
    from mcpx.config.models import Config

    @dataclass
    class Fixed:
        config: Config

    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()
    broker = Broker(store, Fixed(Config()))
    await broker.start()
    try:
        answering: list[asyncio.Task[Any]] = []

        async def committing(handle: Handle) -> None:
            answering.append(asyncio.create_task(broker.answer(handle.id, "accept", {"repo": "a/b"}, by="human")))
            for _ in range(20):  # the answer's task runs meanwhile, as far as it can
                await asyncio.sleep(0)
            assert not answering[0].done()  # it waits for the question's commit to be queued

        question = OpenRequest(session="s", session_source="argument", server="srv", message="which repository?",
                               requested_schema={"type": "object", "properties": {"repo": {"type": "string"}}})
        handle = await asyncio.wait_for(broker.open(question, committing=committing), 10)
        q, answer = await asyncio.wait_for(answering[0], 10)
        assert answer is not None and answer.action == "accept" and answer.content == {"repo": "a/b"}
        assert q.state == "answered"
        assert (await asyncio.wait_for(handle.answer(), 10)).content == {"repo": "a/b"}
    finally:
        await broker.stop()
        await store.close()


def test_none_and_a_bool_bind_as_they_did_before_their_adapters_were_registered() -> None:
    """broker/sqlite.py registers adapters for None and bool (a quick look-up where sqlite3 built an AttributeError's
    message for each): they bind as sqlite3 binds them unadapted, NULL and the bool's integer."""
    assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)] is not None  # mcpx.broker.sqlite is imported
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE TABLE t (a, b, c)")
        db.execute("INSERT INTO t VALUES (?, ?, ?)", (None, True, False))
        assert db.execute("SELECT a, typeof(a), b, typeof(b), c, typeof(c) FROM t").fetchone() == (
            None, "null", 1, "integer", 0, "integer")
        assert db.execute("SELECT COUNT(*) FROM t WHERE b = ? AND a IS ?", (True, None)).fetchone() == (1,)
    finally:
        db.close()


async def test_the_stores_thread_runs_what_it_is_handed_in_turn_and_hands_back_each_outcome() -> None:
    """broker/store_thread.py's StoreThread, which every commit off the loop and every read crosses to: one thread of
    its own, the items in the order handed, each result or exception set on the loop's future; an item whose future
    was cancelled still runs (the store's batch is written all the same), and nothing is set on that future."""
    thread = StoreThread("mcpx-test-store")
    ran: list[tuple[int, str]] = []
    blocker = threading.Event()

    def item(n: int) -> int:
        if n == 0:
            blocker.wait(10)  # the others queue behind it
        ran.append((n, threading.current_thread().name))
        if n == 3:
            raise ValueError("item 3's own trouble")
        return n * 10

    try:
        futures = [thread.run(item, n) for n in range(5)]
        futures[2].cancel()
        blocker.set()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert outcomes[:2] == [0, 10] and outcomes[4] == 40
        assert isinstance(outcomes[2], asyncio.CancelledError)
        assert isinstance(outcomes[3], ValueError) and str(outcomes[3]) == "item 3's own trouble"
        assert ran == [(n, "mcpx-test-store") for n in range(5)]
    finally:
        thread.shutdown()
