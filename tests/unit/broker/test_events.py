"""GET /v1/events: SSE from the durable audit log — live, filtered exactly, replayed after a reconnect."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import EventStream, ask
from harness import PATIENCE, Daemon, make_daemon, stop_process
from mcpx.broker import documents
from mcpx.broker.events import EventBus
from mcpx.broker.models import AuditRecord

pytestmark = pytest.mark.stores  # the store and broker suite: on SQLite and on PostgreSQL


async def read_frames(resp: aiohttp.ClientResponse, count: int, timeout: float = PATIENCE,
                      keep_comments: bool = False) -> list[dict[str, Any]]:
    return await EventStream(resp).frames(count, timeout, keep_comments)


async def test_live_events_carry_id_kind_and_the_record(http: aiohttp.ClientSession) -> None:
    async with http.get("/v1/events", params={"kinds": "elicit"}) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        q = await ask(http, session="s1")
        async with http.post(f"/v1/elicit/{q['id']}/decline", json={"reason": "not this one"}) as r:
            assert r.status == 200
        frames = await read_frames(resp, 2)
    assert [f["event"] for f in frames] == ["elicit.open", "elicit.answered"]
    assert int(frames[0]["id"]) < int(frames[1]["id"])
    assert frames[1]["data"]["elicit"] == q["id"] and frames[1]["data"]["session"] == "s1"
    assert frames[1]["data"]["data"]["action"] == "decline" and frames[1]["data"]["data"]["reason"] == "not this one"


async def test_session_filter_is_exact(http: aiohttp.ClientSession) -> None:
    async with http.get("/v1/events", params={"session": "team"}) as resp:
        await ask(http, session="team-b")
        await ask(http, session="tea")
        mine = await ask(http, session="team")
        frames = await read_frames(resp, 1)
    assert frames[0]["data"]["elicit"] == mine["id"]


async def test_last_event_id_replays_what_was_missed(http: aiohttp.ClientSession) -> None:
    async with http.get("/v1/events") as resp:
        first = await ask(http, session="r")
        seen = await read_frames(resp, 1)
    last = int(seen[0]["id"])
    # while disconnected: an answer and a new question
    async with http.post(f"/v1/elicit/{first['id']}/accept", json={"content": {"repo": "a/b"}}) as r:
        assert r.status == 200
    second = await ask(http, session="r")
    async with http.get("/v1/events", headers={"Last-Event-ID": str(last)}) as resp:
        replayed = await read_frames(resp, 2)
        third = await ask(http, session="r")
        live = await read_frames(resp, 1)
    assert [f["event"] for f in replayed] == ["elicit.answered", "elicit.open"]
    assert replayed[1]["data"]["elicit"] == second["id"]
    assert live[0]["data"]["elicit"] == third["id"]
    ids = [int(f["id"]) for f in replayed + live]
    assert ids == sorted(ids) and ids[0] == last + 1
    async with http.get("/v1/events", headers={"Last-Event-ID": "yesterday"}) as resp:
        assert resp.status == 400


async def raw_data(resp: aiohttp.ClientResponse, count: int) -> list[str]:
    """The next `count` data lines of a stream, as sent."""
    out: list[str] = []
    async with asyncio.timeout(PATIENCE):
        while len(out) < count:
            line = (await resp.content.readline()).decode()
            assert line, "the event stream ended"
            if line.startswith("data: "):
                out.append(line.removeprefix("data: ").rstrip("\n"))
    return out


async def test_a_live_event_is_sent_as_its_replay_is(http: aiohttp.ClientSession) -> None:
    # live, a record's JSON is the document the store wrote with its seq put in front; replayed, it is encoded
    # from the record read back: the two must be the same text, and that of the record's own model
    async with http.get("/v1/events", params={"session": "same"}) as resp:
        q = await ask(http, session="same", message="Quel dépôt ? 🚀")
        async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "é/ü"}}) as r:
            assert r.status == 200
        live = await raw_data(resp, 2)
    async with http.get("/v1/events", params={"session": "same"}, headers={"Last-Event-ID": "0"}) as resp:
        replayed = await raw_data(resp, 2)
    assert live == replayed
    records = [AuditRecord.model_validate_json(text) for text in live]
    assert [r.kind for r in records] == ["elicit.open", "elicit.answered"]
    assert [r.model_dump_json(by_alias=True, exclude_none=True) for r in records] == live
    assert records[1].data["content"] == {"repo": "é/ü"}


def test_a_record_copied_is_encoded_anew() -> None:
    record = AuditRecord(seq=0, at=datetime.now(UTC), kind="elicit.open", elicit="elc-0123456789abcdef", data={})
    stored = record.numbered(7, documents.audit_doc(record))
    assert json.loads(stored.json_bytes())["seq"] == 7
    assert stored.json_bytes() == stored.model_dump_json(by_alias=True, exclude_none=True).encode()
    moved = stored.model_copy(update={"session": "s"})
    assert json.loads(moved.json_bytes())["session"] == "s"


async def test_a_subscriber_of_kinds_is_handed_those_alone_and_the_bus_knows_who_hears_what() -> None:
    bus = EventBus()
    at = datetime.now(UTC)
    opened, done = (AuditRecord(seq=n, at=at, kind=k, data={}) for n, k in ((1, "elicit.open"), (2, "task.done")))
    assert not bus.hears("task.done")
    notices = bus.subscribe(kinds=frozenset({"elicit.open"}))
    assert bus.hears("elicit.open") and not bus.hears("task.done")  # a plain call's end then reaches nobody
    sessions = bus.subscribe(lambda r: r.seq > 1, kinds=frozenset({"elicit.open", "task.done"}))
    assert bus.hears("task.done")
    sessions.close()
    assert not bus.hears("task.done")
    every = bus.subscribe(lambda r: r.kind != "elicit.reminded")  # says no kinds: it may take any
    assert bus.hears("task.done") and bus.hears("elicit.reminded")
    bus.publish(opened)
    bus.publish(done)
    assert [notices.queue.get_nowait()] == [opened] and notices.queue.empty()
    assert [every.queue.get_nowait(), every.queue.get_nowait()] == [opened, done]
    every.close()
    notices.close()
    notices.close()  # twice is once
    assert not bus.hears("elicit.open") and not bus.hears("task.done")


async def test_heartbeats_keep_a_quiet_stream_alive(home: Path) -> None:
    with make_daemon(home, extra_env={"MCPX_SSE_HEARTBEAT": "0.2"}) as d:
        async with d.session() as http, http.get("/v1/events") as resp:
            frames = await read_frames(resp, 3, keep_comments=True)
        assert [f.get("comment") for f in frames] == ["heartbeat"] * 3


async def test_expiry_happens_with_nothing_reading(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    """A subscriber in another process hears the expiry; nobody GETs the question meanwhile."""
    q = await ask(http, ttl=0.5)
    # --since 0 replays what the log already holds, so a slowly starting watcher misses nothing
    watcher = daemon.cli_bg("elicit", "watch", "--json", "--kinds", "elicit.expired", "--since", "0")
    try:
        line = await asyncio.wait_for(asyncio.to_thread(watcher.stdout.readline), PATIENCE)
    finally:
        stop_process(watcher)
    event = json.loads(line)
    assert event["event"] == "elicit.expired" and event["data"]["elicit"] == q["id"]
    assert event["data"]["data"]["action"] == "cancel" and event["data"]["data"]["by"] == "expiry"
    assert event["data"]["data"]["answeredAfterMs"] >= 500
