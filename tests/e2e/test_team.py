"""Several daemons, one truth: real daemons on one real PostgreSQL database (issue 15).

A question opened on one daemon is listed and streamed by the others, answered through any of them, and its
answer reaches the asker on the daemon that raised it; concurrent answers have one winner everywhere; each
expiry happens once; the log has one order on every daemon; PostgreSQL going away and coming back loses and
repeats nothing; a daemon killed with questions pending has its legacy calls ended by the team once (and only
once) its lease lapses, and re-drives its modern calls when it comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from conftest import ask, audited, events, request_in_flight
from gateway_helpers import answer, call, result, stdio, tool_text
from harness import Daemon, make_daemon, running
from mcpx.broker import postgres as postgres_schema
from mcpx.broker import sqlite as sqlite_schema

_names = itertools.count()
SERVERS = {"sdk": stdio("sdk_server.py"), "res": stdio("sdk_resolver.py")}


@contextlib.contextmanager
def team(postgres: Any, tmp_path: Path, size: int, config: dict[str, Any] | None = None) -> Iterator[list[Daemon]]:
    """`size` daemons, each in a home of its own, all on one fresh PostgreSQL database; stopped at the end."""
    url = postgres.create_database(f"team_{next(_names)}")
    with running([make_daemon(tmp_path / f"d{i}", {"servers": {}, **(config or {})}, extra_env={"MCPX_STORE": url})
                  for i in range(size)]) as daemons:
        yield daemons


@contextlib.asynccontextmanager
async def sessions(daemons: list[Daemon]) -> AsyncIterator[list[aiohttp.ClientSession]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(d.session()) for d in daemons]


async def log_of(http: aiohttp.ClientSession) -> list[tuple[int, str, str | None]]:
    """The whole audit log as one daemon replays it to a new stream (Last-Event-ID: 0)."""
    async with http.get("/v1/audit", params={"limit": "10000"}) as r:
        return [(rec["seq"], rec["kind"], rec.get("elicit")) for rec in (await r.json())["records"]]


async def test_opened_on_one_daemon_answered_through_another_and_the_call_there_receives_it(
        postgres: Any, tmp_path: Path) -> None:
    with team(postgres, tmp_path, 2, {"servers": SERVERS}) as (a, b):
        async with sessions([a, b]) as (ha, hb), events(hb, kinds="elicit") as on_b:
            status, body, _ = await call(ha, "sdk", "need_repo", session="deploy")
            assert status == 202, body
            q = body["elicitation"]
            opened = await on_b.until(lambda r: r["kind"] == "elicit.open" and r["elicit"] == q["id"])
            assert opened["data"]["server"] == "sdk"
            async with hb.get("/v1/elicit", params={"session": "deploy"}) as r:
                assert [e["id"] for e in (await r.json())["elicitations"]] == [q["id"]]

            waiter = await request_in_flight(a, "GET", f"/v1/elicit/{q['id']}/wait", params={"timeout": "60"})
            status, answered = await answer(hb, q["id"], "accept", {"repo": "team/one"})
            assert status == 200, answered
            assert answered["answer"]["user"] == getpass.getuser()
            assert answered["answer"]["host"] == socket.gethostname()
            status, waited, _ = await waiter
            assert status == 200 and waited["action"] == "accept" and waited["content"] == {"repo": "team/one"}
            async with ha.get("/v1/elicit", params={"session": "deploy"}) as r:  # answered through B: gone on A too
                assert (await r.json())["count"] == 0
            done = await result(ha, body["task"])  # the upstream call running on A got B's answer
            assert tool_text(done) == {"action": "accept", "data": {"repo": "team/one"}}
            status, again = await answer(ha, q["id"], "decline")
            assert status == 409 and "already answered" in again["error"]["message"]
            # the record of the answer says through whose daemon it came
            async with ha.get("/v1/audit", params={"elicit": q["id"], "kinds": "elicit.answered"}) as r:
                (record,) = (await r.json())["records"]
            assert record["data"]["host"] == socket.gethostname() and record["data"]["user"] == getpass.getuser()
            await audited(ha, "task.done", task=body["task"])  # the call's end commits just behind its result
            assert await log_of(ha) == await log_of(hb)

            async with ha.get("/v1/health") as r:
                store = (await r.json())["store"]
            assert store["kind"] == "postgresql" and [d["alive"] for d in store["daemons"]] == [True, True]
            status_line = a.cli("status")
            assert status_line.returncode == 0 and "store     postgresql" in status_line.stdout
            assert f"{getpass.getuser()}@{socket.gethostname()}" in status_line.stdout, status_line.stdout

            # a question A's agent hands to the person is listed for the person on B at once, as A changed it
            async with ha.post("/v1/elicit", json={"message": "Which branch?", "session": "deploy",
                                                   "audience": "agent-then-human", "requestedSchema": {
                                                       "type": "object", "properties": {"branch": {"type": "string"}}}}
                               ) as r:
                handed = (await r.json())["elicitation"]
            async with ha.post(f"/v1/elicit/{handed['id']}/decline", json={"reason": "not mine"},
                               headers={"X-Mcpx-Answerer": "agent:mcp"}) as r:
                assert r.status == 200
            await on_b.until(lambda r: r["kind"] == "elicit.escalated" and r["elicit"] == handed["id"])
            async with hb.get("/v1/elicit", params={"session": "deploy", "audience": "human"}) as r:
                (listed,) = (await r.json())["elicitations"]
            assert listed["id"] == handed["id"] and listed["escalated"] is True


async def test_concurrent_answers_through_two_daemons_have_exactly_one_winner(postgres: Any, tmp_path: Path) -> None:
    with team(postgres, tmp_path, 2) as (a, b):
        async with sessions([a, b]) as (ha, hb):
            q = await ask(ha, session="race")
            tries = [answer(http, q["id"], "accept", {"repo": f"{name}/{i}"})
                     for i in range(10) for name, http in (("a", ha), ("b", hb))]
            outcomes = await asyncio.gather(*tries)
            winners = [body for status, body in outcomes if status == 200]
            assert len(winners) == 1, outcomes
            assert sorted(status for status, _ in outcomes) == [200] + [409] * 19
            for http in (ha, hb):
                async with http.get(f"/v1/elicit/{q['id']}") as r:
                    assert (await r.json())["answer"]["content"] == winners[0]["answer"]["content"]
                async with http.get("/v1/audit", params={"elicit": q["id"], "kinds": "elicit.answered"}) as r:
                    assert len((await r.json())["records"]) == 1


async def test_three_daemons_expire_each_question_once_and_replay_one_order(postgres: Any, tmp_path: Path) -> None:
    with team(postgres, tmp_path, 3) as daemons:
        async with sessions(daemons) as https:
            async with contextlib.AsyncExitStack() as stack:
                streams = [await stack.enter_async_context(events(h, kinds="elicit")) for h in https]
                asked = [await ask(h, session="tick", ttl=1) for h in https]
                ids = {q["id"] for q in asked}
                for stream in streams:  # every daemon's stream sees every expiry
                    expired: set[str] = set()
                    while expired != ids:
                        rec = await stream.until(lambda r: r["kind"] == "elicit.expired")
                        expired.add(rec["elicit"])
            logs = [await log_of(h) for h in https]
            assert logs[0] == logs[1] == logs[2]
            assert sorted(e for _, kind, e in logs[0] if kind == "elicit.expired") == sorted(ids)
            # Last-Event-ID replays the same records in the same order from any daemon
            for http in https:
                async with events(http, after=0, kinds="elicit") as replay:
                    frames = await replay.frames(6)
                assert [(f["data"]["seq"], f["event"]) for f in frames] == [(s, k) for s, k, _ in logs[0]]


async def test_postgresql_restarting_under_two_daemons_loses_and_repeats_nothing(
        postgres: Any, tmp_path: Path) -> None:
    with team(postgres, tmp_path, 2, {"servers": SERVERS}) as (a, b):
        async with sessions([a, b]) as (ha, hb), events(ha, kinds="elicit") as on_a:
            status, body, _ = await call(ha, "sdk", "need_repo", session="outage")  # A's call waits throughout
            assert status == 202, body
            q = body["elicitation"]
            await on_a.until(lambda r: r["kind"] == "elicit.open")
            postgres.stop()
            try:
                async with ha.post("/v1/elicit", json={"message": "Ship it?", "session": "outage"}) as r:
                    refused = await r.json()
                assert r.status == 503 and refused["error"]["code"] == "store_unavailable", refused
                assert "cannot be reached" in refused["error"]["message"]
                assert "nothing was written" in refused["error"]["message"]
            finally:
                postgres.restart()
            waiter = await request_in_flight(a, "GET", f"/v1/elicit/{q['id']}/wait", params={"timeout": "120"})
            # B answers as soon as PostgreSQL is back; A's call, A's waiter and A's stream catch up
            status, answered = await answer(hb, q["id"], "accept", {"repo": "after/outage"})
            assert status == 200, answered
            done = await result(ha, body["task"])
            assert tool_text(done) == {"action": "accept", "data": {"repo": "after/outage"}}
            status, waited, _ = await waiter
            assert status == 200 and waited["content"] == {"repo": "after/outage"}, waited
            rec = await on_a.until(lambda r: r["kind"] == "elicit.answered")
            assert rec["elicit"] == q["id"]
            second = await ask(hb, session="outage")  # committed by B: A's stream hears it live again
            rec = await on_a.until(lambda r: r["kind"] == "elicit.open")
            assert rec["elicit"] == second["id"]
        async with sessions([a, b]) as (ha, hb):
            await audited(ha, "task.done", task=body["task"])  # the call's end commits just behind its result
            for http in (ha, hb):
                async with http.get("/v1/elicit", params={"session": "outage", "state": "all"}) as r:
                    listed = (await r.json())["elicitations"]
                assert [e["id"] for e in listed] == [q["id"], second["id"]]  # the refused one was never written
            log = await log_of(ha)
            assert [k for _, k, e in log if e == q["id"]] == ["elicit.open", "elicit.answered", "elicit.resumed"]
            assert log == await log_of(hb)


async def test_a_killed_daemons_legacy_call_ends_once_its_lease_lapses_and_its_modern_call_resumes(
        postgres: Any, tmp_path: Path) -> None:
    lease = 2.0
    config = {"servers": SERVERS, "storeLease": f"{lease:g}s"}
    with team(postgres, tmp_path, 2, config) as (a, b):
        async with sessions([a, b]) as (ha, hb), events(hb, kinds="elicit") as on_b:
            status, legacy, _ = await call(ha, "sdk", "need_repo", session="ci")
            assert status == 202, legacy
            status, modern, _ = await call(ha, "res", "need_repo", session="ci")
            assert status == 202, modern
            async with ha.get("/v1/health") as r:
                a_id = (await r.json())["store"]["daemon"]
            a.kill9()
            killed = time.time()
            gone = await on_b.until(lambda r: r["kind"] == "elicit.abandoned")
            assert gone["elicit"] == legacy["elicitation"]["id"]
            reason = gone["data"]["reason"]
            assert a_id in reason and socket.gethostname() in reason and "lease" in reason, reason
            # not before the lease lapsed: A renews it every lease/3, so it lapses at least 2/3 of it after the kill
            assert datetime.fromisoformat(gone["at"]).timestamp() >= killed + lease * 2 / 3 - 0.1, (gone["at"], killed)
            async with hb.get(f"/v1/tasks/{legacy['task']}") as r:
                lost = await r.json()
            assert lost["state"] == "failed" and a_id in lost["error"]
            async with hb.get(f"/v1/elicit/{modern['elicitation']['id']}") as r:
                assert (await r.json())["elicitation"]["state"] == "pending"  # its own daemon re-drives it
            async with hb.get("/v1/audit", params={"elicit": legacy["elicitation"]["id"],
                                                   "kinds": "elicit.abandoned"}) as r:
                assert len((await r.json())["records"]) == 1

        a.restart()
        async with sessions([a, b]) as (ha, hb):
            status, _ = await answer(hb, modern["elicitation"]["id"], "accept", {"repo": "after/kill"})
            assert status == 200
            done = await result(ha, modern["task"])
            assert done["state"] == "completed", done
            assert tool_text(done) == {"action": "accept", "data": {"repo": "after/kill"}}


def test_a_database_from_a_newer_mcpx_is_refused_before_it_is_used(postgres: Any, tmp_path: Path) -> None:
    import psycopg

    url = postgres.create_database(f"newer_{next(_names)}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA mcpx")
        conn.execute("CREATE TABLE mcpx.schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO mcpx.schema_version VALUES (99)")
    d = make_daemon(tmp_path / "d", extra_env={"MCPX_STORE": url})
    try:
        with contextlib.suppress(RuntimeError):
            d.start()
        assert d.proc is not None and d.proc.wait(60) != 0
        log = d.tail()
        assert f"schema version 99, newer than this mcpx understands ({postgres_schema.SCHEMA_VERSION})" in log, log
        assert "upgrade mcpx" in log
    finally:
        d.stop()
    with psycopg.connect(url, autocommit=True) as conn:  # nothing was created beside it
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='mcpx'")]
    assert tables == ["schema_version"]
    # and mcpx.db, whose version is its PRAGMA user_version
    home = tmp_path / "solo"
    home.mkdir()
    with contextlib.closing(sqlite3.connect(home / "mcpx.db", isolation_level=None)) as db:
        db.execute("PRAGMA user_version=99")
    d = make_daemon(home)
    try:
        with contextlib.suppress(RuntimeError):
            d.start()
        assert d.proc is not None and d.proc.wait(60) != 0
        log = d.tail()
        newer = f"newer than this mcpx understands ({sqlite_schema.SCHEMA_VERSION})"
        assert f"mcpx.db holds mcpx schema version 99, {newer}" in log, log
    finally:
        d.stop()
    with contextlib.closing(sqlite3.connect(home / "mcpx.db")) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == []
