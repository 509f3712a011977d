"""Formats servers really send: `password` goes to the person as a credential, an unknown one is plain text.

Through the real daemon and a real SDK server: the asker gets the value, while the stored answer,
the audit log, the event stream and every file mcpx writes hold only [redacted].
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from conftest import request_in_flight, store_contents
from gateway_helpers import answer, call, result, stdio, tool_text
from harness import Daemon, make_daemon

pytestmark = pytest.mark.stores  # the store and broker suite: on SQLite and on PostgreSQL

PIN = "4719-unguessable-pin"


@pytest.fixture
def daemon(home: Path) -> Iterator[Daemon]:
    """conftest's `daemon` (and so its `http`), with a real server behind it."""
    with make_daemon(home, {"servers": {"cred": stdio("credential_asker.py")}}) as d:
        yield d


async def read_until(stream: aiohttp.StreamReader, marker: bytes, timeout: float = 20) -> bytes:
    """The event stream's bytes up to and including the frame that holds `marker`."""
    seen = b""
    async with asyncio.timeout(timeout):
        while marker not in seen:
            seen += await stream.readuntil(b"\n\n")
    return seen


async def test_a_password_format_field_is_the_persons_and_its_value_reaches_only_the_asker(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    async with http.get("/v1/events", params={"kinds": "elicit"}) as events:
        await asyncio.wait_for(events.content.readuntil(b"\n\n"), 10)  # the opening id frame: subscribed
        status, body, _ = await call(http, "cred", "sign_in", session="s-pin")
        assert status == 202, body
        q = body["elicitation"]
        # refused with 400 before: now asked, routed by the format alone (a field named "pin" says nothing)
        assert q["audience"] == "human" and q["secretFields"] == ["pin"], q
        assert "'pin' is a credential" in q["reason"]
        assert q["requestedSchema"]["properties"]["shade"]["format"] == "color"

        status, refused = await answer(http, q["id"], "accept", {"user": "ann", "pin": "0000"},
                                       **{"X-Mcpx-Answerer": "agent:mcp"})
        assert status == 403 and "for the person" in refused["error"]["message"]
        status, shade_checked = await answer(http, q["id"], "accept", {"user": "ann", "pin": PIN, "shade": 7})
        assert status == 422 and shade_checked["error"]["fields"] == {"shade": "must be a string"}

        # a long poll waiting as the answer comes is shown the stored copy too
        waiter = await request_in_flight(daemon, "GET", f"/v1/elicit/{q['id']}/wait", params={"timeout": "60"})
        status, answered = await answer(http, q["id"], "accept", {"user": "ann", "pin": PIN, "shade": "teal-ish"})
        assert status == 200, answered
        assert answered["answer"]["content"] == {"user": "ann", "pin": "[redacted]", "shade": "teal-ish"}
        streamed = await read_until(events.content, b"event: elicit.answered")

    # the asker (the server) received the very value typed
    done = await result(http, body["task"])
    assert tool_text(done) == {"action": "accept", "content": {
        "user": "ann", "pin": "sha256:" + hashlib.sha256(PIN.encode()).hexdigest(), "shade": "teal-ish"}}

    async with http.get(f"/v1/elicit/{q['id']}") as r:
        stored = (await r.json())["answer"]
    async with http.get(f"/v1/elicit/{q['id']}/wait", params={"timeout": "1"}) as r:
        waited = await r.json()
    status, woken, _ = await waiter
    assert status == 200, woken
    async with http.get("/v1/audit", params={"elicit": q["id"], "kinds": "elicit.answered"}) as r:
        (record,) = (await r.json())["records"]
    for shown in (stored["content"], waited["content"], woken["content"], record["data"]["content"]):
        assert shown == {"user": "ann", "pin": "[redacted]", "shade": "teal-ish"}
    assert b'"pin":"[redacted]"' in streamed and PIN.encode() not in streamed

    daemon.stop()  # everything written is on disk: the database, its WAL, the logs
    for path in daemon.home.iterdir():
        if path.is_file():
            assert PIN.encode() not in path.read_bytes(), path.name
    kept = store_contents(daemon.home)  # mcpx.db, or the PostgreSQL database
    assert PIN.encode() not in kept and b'"pin":"[redacted]"' in kept
