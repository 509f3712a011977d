"""Garbage on every door of a real daemon: /v1, /mcp, the stream surface and `mcpx serve`'s stdin.

Each gets a named 4xx or a JSON-RPC error, never a 500 or a hang, and a question survives it whole.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import ask, daemon_of
from gateway_helpers import HttpPeer, call, stdio
from harness import Daemon, make_daemon, mcpx_command

DEEP_ARRAY = b"[" * 100_000
DEEP_META = b'{"a":' * 5000 + b"1" + b"}" * 5000
ELICIT = {"elicitation": {"form": {}}}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": ELICIT, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture
def daemon(request: pytest.FixtureRequest, home: Path) -> Iterator[Daemon]:
    """conftest's `daemon` (and so its `http`), with a real server behind it: the module's, for the tests marked
    `shared_daemon` (each sends its garbage to questions and connections of its own)."""
    with daemon_of(request, home, {"servers": {"sdk": stdio("sdk_server.py")}}) as d:
        yield d


async def post_raw(http: aiohttp.ClientSession, path: str, data: bytes) -> tuple[int, dict[str, Any]]:
    async with http.post(path, data=data, headers={"Content-Type": "application/json",
                                                   "Accept": "application/json, text/event-stream"}) as r:
        return r.status, await r.json()


async def state_of(http: aiohttp.ClientSession, eid: str) -> tuple[str, Any]:
    async with http.get(f"/v1/elicit/{eid}") as r:
        body = await r.json()
    return body["elicitation"]["state"], body["answer"]


def nested_meta(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.shared_daemon
async def test_deep_nesting_on_v1_is_a_named_400_and_the_question_is_untouched(http: aiohttp.ClientSession) -> None:
    q = await ask(http)
    for path, data in (("/v1/elicit", DEEP_ARRAY),
                       ("/v1/elicit", b'{"message": "m", "_meta": ' + DEEP_META + b"}"),
                       (f"/v1/elicit/{q['id']}/accept", DEEP_ARRAY),
                       (f"/v1/elicit/{q['id']}/accept", b'{"content": {"repo": ' + DEEP_META + b"}}"),
                       # deep enough to pass the decoder's own recursion guard, too deep for mcpx
                       (f"/v1/elicit/{q['id']}/accept", b'{"content": {"repo": ' + b"[" * 300 + b"]" * 300 + b"}}")):
        status, body = await post_raw(http, path, data)
        assert status == 400, (path, body)
        assert body["error"]["code"] == "too_deep"
        assert "more than 100 levels deep" in body["error"]["message"]
    assert await state_of(http, q["id"]) == ("pending", None)
    # a real structure well inside the bound is taken as it is
    async with http.post("/v1/elicit", json={"message": "m", "_meta": nested_meta(90)}) as r:
        assert r.status == 201, await r.text()
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "a/b"}}) as r:
        assert r.status == 200
    assert (await state_of(http, q["id"]))[1]["content"] == {"repo": "a/b"}


@pytest.mark.shared_daemon
async def test_a_lone_surrogate_is_named_and_the_question_is_neither_lost_nor_corrupted(
        http: aiohttp.ClientSession) -> None:
    q = await ask(http)
    # as a JSON escape, and as the raw bytes a UTF-8 encoder would never write (CESU)
    for content in (b'{"content": {"repo": "a\\udfffb"}}', b'{"content": {"repo": "a\xed\xbf\xbfb"}}'):
        status, body = await post_raw(http, f"/v1/elicit/{q['id']}/accept", content)
        assert status == 400, body
        assert list(body["error"]["fields"]) == ["content.repo"]
        assert "lone surrogate" in body["error"]["message"]
    assert await state_of(http, q["id"]) == ("pending", None)

    async with http.get("/v1/elicit", params={"state": "all"}) as r:
        before = (await r.json())["count"]
    status, body = await post_raw(http, "/v1/elicit", b'{"message": "m", "requestedSchema": {"type": "object", '
                                                      b'"properties": {"\\udfff": {"type": "string"}}}}')
    assert status == 400, body
    assert list(body["error"]["fields"]) == ["requestedSchema.properties.\\udfff"]
    async with http.get("/v1/elicit", params={"state": "all"}) as r:
        assert (await r.json())["count"] == before  # nothing half-opened

    # a surrogate *pair* is a real character (U+1F600), not a lone one: taken and kept exact
    async with http.post(f"/v1/elicit/{q['id']}/accept", data=b'{"content": {"repo": "\\ud83d\\ude00/x"}}',
                         headers={"Content-Type": "application/json"}) as r:
        assert r.status == 200, await r.text()
    assert (await state_of(http, q["id"]))[1]["content"] == {"repo": "\U0001F600/x"}


@pytest.mark.shared_daemon
async def test_event_ids_are_bounded_integers(http: aiohttp.ClientSession) -> None:
    huge = str(10**23)
    for params, field in (({"after": huge}, "after"), ({"after": "1e23"}, "after"), ({"after": "-1"}, "after")):
        async with http.get("/v1/audit", params=params) as r:
            body = await r.json()
        assert r.status == 400 and field in body["error"]["fields"], body
    for headers, params, field in (({"Last-Event-ID": huge}, {}, "Last-Event-ID"),
                                   ({"Last-Event-ID": "1e23"}, {}, "Last-Event-ID"),
                                   ({"Last-Event-ID": "²"}, {}, "Last-Event-ID"),
                                   ({}, {"lastEventId": huge}, "lastEventId"),
                                   ({}, {"lastEventId": "-5"}, "lastEventId")):
        async with http.get("/v1/events", headers=headers, params=params) as r:
            body = await r.json()
        assert r.status == 400 and field in body["error"]["fields"], (headers, params, body)
    # the largest id there can be is still an id: the stream opens and says where it stands
    async with http.get("/v1/events", headers={"Last-Event-ID": str(2**63 - 1)}) as r:
        assert r.status == 200
        head = await asyncio.wait_for(r.content.readuntil(b"\n\n"), 10)
    assert head == b"retry: 1000\nid: 9223372036854775807\n\n"


@pytest.mark.shared_daemon
async def test_mcp_answers_garbage_in_json_rpc_shape(http: aiohttp.ClientSession) -> None:
    deep_request = (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": ' + DEEP_META + b"}}")
    for data in (DEEP_ARRAY, deep_request):
        status, body = await post_raw(http, "/mcp", data)
        assert status == 400, body
        assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32700
        assert "more than 100 levels deep" in body["error"]["message"]
    status, body = await post_raw(http, "/mcp", b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}')
    assert status == 400 and body["error"]["code"] == -32600 and "id must be" in body["error"]["message"]
    status, body = await post_raw(http, "/mcp", b"[" + b" " * (2 * 1024 * 1024) + b"]")
    assert status == 413 and body["jsonrpc"] == "2.0" and "limit" in body["error"]["message"]
    status, body = await post_raw(http, "/mcp/nosuch", json.dumps(INIT).encode())
    assert status == 404 and body["id"] == 1 and body["error"]["code"] == -32602
    assert "nosuch" in body["error"]["message"]
    status, body = await post_raw(http, "/mcp", json.dumps(INIT).encode())  # and it still serves
    assert status == 200 and body["result"]["serverInfo"]["name"] == "mcpx"


@pytest.mark.shared_daemon
async def test_the_stream_surface_answers_garbage_and_keeps_the_connection(daemon: Daemon) -> None:
    async with daemon.session() as http, http.ws_connect("/v1/mcp/stream", max_msg_size=16 * 1024 * 1024) as ws:
        for frame, code in ((DEEP_ARRAY.decode(), -32700),
                            ('{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": ' + DEEP_META.decode() + "}",
                             -32700),
                            ('{"jsonrpc": "2.0", "id": [1], "method": "ping"}', -32600)):
            await ws.send_str(frame)
            reply = json.loads((await ws.receive(timeout=10)).data)
            assert reply["error"]["code"] == code, reply
        await ws.send_str(json.dumps(INIT))
        reply = json.loads((await ws.receive(timeout=10)).data)
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "mcpx"


@pytest.mark.shared_daemon
async def test_an_agents_answer_with_a_lone_surrogate_is_refused_by_field_over_mcp(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, session="s-surrogate")
    lines = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcpx_elicit_answer", "arguments": {
                 "id": q["id"], "action": "accept", "content": {"repo": "a\udfffb"}}}}]
    replies = await serve(daemon, [json.dumps(m).encode() for m in lines], {2}, env={"MCPX_SESSION_ID": "s-surrogate"})
    answer = replies[2]["result"]
    assert answer["isError"] is True
    assert "content.repo is not valid Unicode text" in answer["content"][0]["text"]
    assert await state_of(http, q["id"]) == ("pending", None)


async def serve(d: Daemon, lines: list[bytes], expect: set[int], env: dict[str, str] | None = None,
                ) -> dict[Any, Any]:
    """Feed `mcpx serve` these lines; once the replies to `expect` are in, end its input: it must exit.

    Its replies by id; the errors it could give no id to, as a list of codes under None.
    """
    proc = await asyncio.create_subprocess_exec(
        *mcpx_command("serve"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env={**d.env, **(env or {})}, cwd=d.home, limit=1 << 20)
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[Any, Any] = {None: []}

    def take(line: bytes) -> None:
        msg = json.loads(line)
        if msg.get("id") is None:
            replies[None].append(msg["error"]["code"])
        else:
            replies[msg["id"]] = msg

    try:
        proc.stdin.write(b"".join(line + b"\n" for line in lines))
        await proc.stdin.drain()
        async with asyncio.timeout(60):
            while not expect <= set(replies):
                line = await proc.stdout.readline()
                assert line, f"mcpx serve ended its output with {sorted(expect - set(replies))} unanswered"
                take(line)
        proc.stdin.close()
        async with asyncio.timeout(20):  # the end of input ends it
            for line in (await proc.stdout.read()).splitlines():
                take(line)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return replies


@pytest.mark.shared_daemon
async def test_mcpx_serve_answers_unfollowable_ids_and_deep_lines_and_keeps_serving(daemon: Daemon) -> None:
    garbage = [b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
               b'{"jsonrpc": "2.0", "id": [1, 2], "method": "ping"}',
               b'{"jsonrpc": "2.0", "id": {"a": 1}, "result": {}}',
               DEEP_ARRAY,
               b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": ' + DEEP_META + b"}}"]
    lines = [*garbage, json.dumps(INIT).encode(), b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
             b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}',
             b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sdk_echo", '
             b'"arguments": {"text": "still here"}}}']
    replies = await serve(daemon, lines, {1, 2, 3})
    assert sorted(replies[None]) == [-32700, -32700, -32600, -32600, -32600]
    assert replies[1]["result"]["serverInfo"]["name"] == "mcpx"
    assert any(t["name"] == "sdk_echo" for t in replies[2]["result"]["tools"])
    assert replies[3]["result"]["content"][0]["text"] == "echo: still here"


async def test_an_upstreams_reply_nested_too_deep_fails_the_call_at_once_naming_why(home: Path) -> None:
    peer = HttpPeer("deep_http_server.py")
    try:
        # a timeout far beyond the test's bound: only a prompt, named failure passes
        with make_daemon(home, {"servers": {"deep": {"url": peer.url, "timeout": 600}}}) as d:
            async with d.session() as http:
                status, body, _ = await asyncio.wait_for(call(http, "deep", "deep"), 30)
        assert status == 502, body
        assert "its reply nests arrays and objects more than 100 levels deep" in body["error"]["message"]
    finally:
        peer.stop()


@pytest.mark.shared_daemon
async def test_nan_and_infinity_are_not_json_on_any_door(http: aiohttp.ClientSession) -> None:
    """Python's decoder takes NaN and Infinity; they are no JSON numbers, and were stored as null while the asker
    in the daemon got the float. Each door names them, and the question is untouched."""
    q = await ask(http)
    for path in ("/v1/elicit", f"/v1/elicit/{q['id']}/accept"):
        for constant in (b"NaN", b"Infinity", b"-Infinity"):
            status, body = await post_raw(http, path, b'{"message": "m", "content": {"n": ' + constant + b"}}")
            assert status == 400, (path, body)
            assert f"{constant.decode()} is not a JSON number" in body["error"]["message"], body
    assert await state_of(http, q["id"]) == ("pending", None)
    status, body = await post_raw(http, "/mcp", b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": '
                                                b'{"_meta": {"n": NaN}}}')
    assert status == 400 and body["error"]["code"] == -32700 and "NaN is not a JSON number" in body["error"]["message"]
    # the string "NaN" is text, and a number is a number
    async with http.post(f"/v1/elicit/{q['id']}/accept", data=b'{"content": {"repo": "NaN"}}',
                         headers={"Content-Type": "application/json"}) as r:
        assert r.status == 200, await r.text()
    assert (await state_of(http, q["id"]))[1]["content"] == {"repo": "NaN"}
