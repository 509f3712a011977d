"""Tasks for mcpx's own clients (the Tasks extension, SEP-2663, with mcpx as the server): a raw 2026-07-28 client
declaring `io.modelcontextprotocol/tasks`, written here from the extension's text, on `/mcp` (Streamable HTTP)
and on `mcpx serve`'s pipes, against a real daemon with real peers: the SDK server, and the FastMCP tasks peer, so
that a task of mcpx's rides a task of the server's end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest
from test_upstream_tasks import peer_task, upstream_task

from gateway_helpers import HttpPeer, answer, result, stdio, until_pending
from harness import PATIENCE, Daemon, free_port, make_daemon, mcpx_command

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"


def declaring(session: str = "s1", tasks: bool = True) -> dict[str, Any]:
    caps: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
    if tasks:
        caps["extensions"] = {TASKS: {}}
    return {"io.modelcontextprotocol/protocolVersion": MODERN, CAPS: caps,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-task-client", "version": "1"},
            "io.mcpx/session": session}


@pytest.fixture
def surf(home: Path) -> Iterator[Daemon]:
    with make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"grace": "1s"}},
                     listen=f"127.0.0.1:{free_port()}") as d:
        yield d


# ---- two raw clients, one per transport: a request and its reply; a listen and what it is sent


class Listening(Protocol):
    async def next(self) -> dict[str, Any]: ...


class Wire(Protocol):
    async def request(self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
                      ) -> dict[str, Any]: ...

    def listen(self, params: dict[str, Any], meta: dict[str, Any] | None = None
               ) -> contextlib.AbstractAsyncContextManager[Listening]: ...


class Queued:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.queue.get(), PATIENCE)


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


class Http:
    """POSTs to /mcp, each request alone, with the headers the transport asks for (Mcp-Name: the tool, the task)."""

    def __init__(self, d: Daemon, path: str = "/mcp") -> None:
        self.url = f"http://{d.listen}{path}"
        self.token = (d.home / "token").read_text().strip()
        self.ids = iter(range(1, 1 << 30))

    def _post(self, http: aiohttp.ClientSession, method: str, params: dict[str, Any], meta: dict[str, Any] | None,
              rid: int) -> Any:
        named = params.get("taskId") if method.startswith("tasks/") else params.get("name")
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": MODERN, "Mcp-Method": method, **({"Mcp-Name": named} if named else {})}
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta or declaring()}}
        return http.post(self.url, json=body, headers=headers)

    async def request(self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
        rid = next(self.ids)
        async with aiohttp.ClientSession() as http, self._post(http, method, params, meta, rid) as r:
            if r.headers.get("Content-Type", "").startswith("text/event-stream"):
                return next(m for m in sse_messages(await r.text()) if m.get("id") == rid)
            reply: dict[str, Any] = await r.json()
            return reply

    @asynccontextmanager
    async def listen(self, params: dict[str, Any], meta: dict[str, Any] | None = None) -> AsyncIterator[Listening]:
        listening = Queued()
        async with aiohttp.ClientSession() as http, self._post(http, "subscriptions/listen", params, meta,
                                                               next(self.ids)) as r:
            async def read() -> None:
                if not r.headers.get("Content-Type", "").startswith("text/event-stream"):
                    listening.queue.put_nowait(await r.json())  # refused: a JSON-RPC error
                    return
                async for line in r.content:
                    if line.startswith(b"data: "):
                        listening.queue.put_nowait(json.loads(line[6:]))
            reader = asyncio.create_task(read())
            try:
                yield listening
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)


class Pipe:
    """`mcpx serve` on pipes, as a host runs it, spoken to in 2026-07-28 JSON lines (no initialize)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout = proc, proc.stdin, proc.stdout
        self.ids = iter(range(1, 1 << 30))
        self.replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.listening: dict[int, Queued] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while line := await self.stdout.readline():
            msg = json.loads(line)
            sub = (msg.get("params") or {}).get("_meta", {}).get("io.modelcontextprotocol/subscriptionId")
            if msg.get("id") in self.listening or sub in self.listening:
                self.listening[msg.get("id") if msg.get("id") in self.listening else sub].queue.put_nowait(msg)
            elif msg.get("id") in self.replies:
                self.replies.pop(msg["id"]).set_result(msg)

    async def _send(self, rid: int, method: str, params: dict[str, Any], meta: dict[str, Any] | None) -> None:
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta or declaring()}}
        self.stdin.write(json.dumps(body).encode() + b"\n")
        await self.stdin.drain()

    async def request(self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
        rid = next(self.ids)
        self.replies[rid] = asyncio.get_running_loop().create_future()
        waiting = self.replies[rid]
        await self._send(rid, method, params, meta)
        return await asyncio.wait_for(waiting, PATIENCE)

    @asynccontextmanager
    async def listen(self, params: dict[str, Any], meta: dict[str, Any] | None = None) -> AsyncIterator[Listening]:
        rid = next(self.ids)
        self.listening[rid] = Queued()
        await self._send(rid, "subscriptions/listen", params, meta)
        try:
            yield self.listening[rid]
        finally:
            self.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": rid}}).encode() + b"\n")
            del self.listening[rid]


@asynccontextmanager
async def wire(d: Daemon, transport: str) -> AsyncIterator[Wire]:
    if transport == "http":
        yield Http(d)
        return
    proc = await asyncio.create_subprocess_exec(*mcpx_command("serve"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL, env=d.env, cwd=d.home, limit=1 << 24)
    pipe = Pipe(proc)
    try:
        yield pipe
    finally:
        pipe.reader.cancel()
        proc.kill()
        await proc.wait()


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, reply
    got: dict[str, Any] = reply["result"]
    return got


def tool_json(call_result: dict[str, Any]) -> Any:
    return json.loads(call_result["content"][0]["text"])


async def handle_of(w: Wire, tool: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
    handle = ok(await w.request("tools/call", {"name": tool, "arguments": arguments}, **kw))
    assert handle["resultType"] == "task", handle
    assert handle["taskId"].startswith("tsk-") and {"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(
        handle), handle
    assert "inputRequests" not in handle and "result" not in handle
    return handle


# ---- the tests


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_the_extension_is_declared_in_the_modern_era_only(surf: Daemon, transport: str) -> None:
    async with wire(surf, transport) as w:
        discovered = ok(await w.request("server/discover", {}))
        assert discovered["capabilities"]["extensions"] == {TASKS: {}}
    legacy = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    if transport == "http":
        token = (surf.home / "token").read_text().strip()
        async with aiohttp.ClientSession() as http, http.post(f"http://{surf.listen}/mcp", json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": legacy},
                headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}) as r:
            initialized = (await r.json())["result"]
        # /mcp/SERVER is transparent: the client sees the server's own capabilities (this one has no tasks)
        scoped = ok(await Http(surf, "/mcp/sdk").request("server/discover", {}))
        assert "extensions" not in scoped["capabilities"]
    else:
        proc = await asyncio.create_subprocess_exec(*mcpx_command("serve"), stdin=subprocess.PIPE,
                                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                                    env=surf.env, cwd=surf.home)
        out, _ = await asyncio.wait_for(proc.communicate(json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": legacy}).encode() + b"\n"), PATIENCE)
        initialized = json.loads(out.splitlines()[0])["result"]
    assert initialized["capabilities"] == {"tools": {"listChanged": True}}


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_a_call_waiting_on_a_question_is_a_task_answered_with_tasks_update(surf: Daemon, transport: str
                                                                                  ) -> None:
    async with wire(surf, transport) as w, surf.session() as rest:
        handle = await handle_of(w, "sdk_file_issue", {})
        tid = handle["taskId"]
        # at once if the question opened within elicit.grace, else (the server still starting) working until then
        assert handle["status"] in ("input_required", "working") and handle["ttlMs"] is None
        (q,) = await until_pending(rest, session="s1")
        got = ok(await w.request("tasks/get", {"taskId": tid}))
        assert got["resultType"] == "complete" and got["status"] == "input_required" and got["taskId"] == tid
        (key, request), = got["inputRequests"].items()
        assert key == q["id"] and key.startswith("elc-")  # mcpx's own question id
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "sdk (via mcpx) asks: Describe the issue"
        assert request["params"]["mode"] == "form" and "title" in request["params"]["requestedSchema"]["properties"]
        assert q["id"] in got["statusMessage"]

        # content that does not fit: acknowledged, the question stays open, and the report says why
        bad = {key: {"action": "accept", "content": {"title": "crash", "count": 99, "color": "red", "notify": True}}}
        acked = ok(await w.request("tasks/update", {"taskId": tid, "inputResponses": bad}))
        assert acked["resultType"] == "complete" and set(acked) == {"resultType", "_meta"}  # an empty result
        again = ok(await w.request("tasks/get", {"taskId": tid}))
        assert again["status"] == "input_required" and list(again["inputRequests"]) == [key]
        assert f"the answer to {key} was not accepted: count" in again["statusMessage"]

        content = {"title": "crash", "count": 2, "color": "green", "notify": False}
        assert ok(await w.request("tasks/update", {"taskId": tid, "inputResponses": {
            key: {"action": "accept", "content": content}, "no-such-key": {"action": "decline"}}}))["resultType"] == \
            "complete"
        await result(rest, tid)  # the call is over (REST waits for it): the task reports it
        done = ok(await w.request("tasks/get", {"taskId": tid}))
        assert done["status"] == "completed" and "inputRequests" not in done
        assert tool_json(done["result"]) == {"action": "accept", "data": content}  # exactly what was given
        async with rest.get(f"/v1/elicit/{key}") as r:
            assert (await r.json())["answer"]["by"] == "person:mcp-client"


async def test_a_question_answered_elsewhere_moves_the_task_on_and_the_late_answer_is_ignored(surf: Daemon) -> None:
    w = Http(surf)
    async with surf.session() as rest:
        tid = (await handle_of(w, "sdk_need_repo", {}))["taskId"]
        (q,) = await until_pending(rest, session="s1")
        assert (await answer(rest, q["id"], "accept", {"repo": "first/wins"}))[0] == 200
        await result(rest, tid)
        late = {q["id"]: {"action": "accept", "content": {"repo": "too/late"}}}
        assert ok(await w.request("tasks/update", {"taskId": tid, "inputResponses": late}))["resultType"] == "complete"
        done = ok(await w.request("tasks/get", {"taskId": tid}))
        assert done["status"] == "completed"
        assert tool_json(done["result"]) == {"action": "accept", "data": {"repo": "first/wins"}}
        async with rest.get(f"/v1/elicit/{q['id']}") as r:
            assert (await r.json())["answer"]["by"].startswith("person:")  # REST's, not the client's late one


async def test_only_a_client_that_declares_the_extension_gets_a_task(surf: Daemon) -> None:
    w = Http(surf)
    plain = declaring(tasks=False)
    # without it: the modern era's input_required, as before, and never a handle
    first = ok(await w.request("tools/call", {"name": "sdk_need_repo", "arguments": {}}, meta=plain))
    assert first["resultType"] == "input_required" and "requestState" in first, first
    finished = ok(await w.request("tools/call", {"name": "sdk_sleepy", "arguments": {"seconds": 1.5}}, meta=plain))
    assert finished["resultType"] == "complete" and finished["content"][0]["text"] == "slept 1.5"
    # with it: a call done within elicit.grace is its result; one still running after it is a task
    quick = ok(await w.request("tools/call", {"name": "sdk_echo", "arguments": {"text": "now"}}))
    assert quick["resultType"] == "complete" and quick["content"][0]["text"] == "echo: now"
    slow = await handle_of(w, "sdk_sleepy", {"seconds": 1.5})
    assert slow["status"] == "working" and "waiting on the upstream server sdk" in slow["statusMessage"]
    # tasks/* from a request that does not declare it: refused, naming what is missing
    refused = await w.request("tasks/get", {"taskId": slow["taskId"]}, meta=plain)
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    async with surf.session() as rest:
        await result(rest, slow["taskId"])
    done = ok(await w.request("tasks/get", {"taskId": slow["taskId"]}))
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "slept 1.5"


async def test_another_sessions_task_is_unknown_to_every_tasks_request(surf: Daemon) -> None:
    w = Http(surf)
    tid = (await handle_of(w, "sdk_need_repo", {}, meta=declaring("mine")))["taskId"]
    for method, params in (("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {}})):
        for session, asked in (("theirs", tid), ("mine", "tsk-0000000000000000")):
            reply = await w.request(method, {"taskId": asked, **params}, meta=declaring(session))
            assert reply["error"]["code"] == -32602 and asked in reply["error"]["message"], (method, session, reply)
    async with surf.session() as rest:
        (q,) = await until_pending(rest, session="mine")
        # nothing of it moved: still waiting for its question, which still belongs to its session
        assert ok(await w.request("tasks/get", {"taskId": tid}, meta=declaring("mine")))["status"] == \
            "input_required"
        await answer(rest, q["id"], "cancel")
        await result(rest, tid)


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_subscriptions_listen_pushes_each_change_of_the_task(surf: Daemon, transport: str) -> None:
    async with wire(surf, transport) as w, surf.session() as rest:
        unknown = {"notifications": {"taskIds": ["tsk-0000000000000000"]}}
        async with w.listen(unknown, meta=declaring(tasks=False)) as ls:
            refused = await ls.next()
            assert refused["error"]["code"] == -32021
            assert refused["error"]["data"]["requiredCapabilities"]["extensions"] == {TASKS: {}}
        tid = (await handle_of(w, "sdk_need_repo", {}))["taskId"]
        async with w.listen({"notifications": {"taskIds": [tid, "tsk-0000000000000000"]}}) as ls:
            ack = await ls.next()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"taskIds": [tid]}  # the unknown one left out
            now = await ls.next()
            assert now["method"] == "notifications/tasks" and now["params"]["taskId"] == tid
            # on a loaded machine the grace can run out before the question opens: the task is working until then
            while now["params"]["status"] == "working":
                now = await ls.next()
                assert now["method"] == "notifications/tasks" and now["params"]["taskId"] == tid
            assert now["params"]["status"] == "input_required"
            (key, request), = now["params"]["inputRequests"].items()
            assert request["params"]["message"] == "sdk (via mcpx) asks: Which repository should this go in?"
            assert (await answer(rest, key, "accept", {"repo": "via/rest"}))[0] == 200
            while (moved := (await ls.next())["params"])["status"] not in ("completed", "failed", "cancelled"):
                assert moved["status"] == "working" and "inputRequests" not in moved
            assert moved["status"] == "completed"
            assert tool_json(moved["result"]) == {"action": "accept", "data": {"repo": "via/rest"}}
            # a full DetailedTask: what tasks/get says now
            polled = ok(await w.request("tasks/get", {"taskId": tid}))
            assert {k: v for k, v in moved.items() if k != "_meta"} == {
                k: v for k, v in polled.items() if k not in ("_meta", "resultType")}


# ---- a task of mcpx's riding a task of the server's (fastmcp-tasks over Streamable HTTP)


@pytest.fixture
def tasks_peer() -> Iterator[HttpPeer]:
    with HttpPeer("tasks_server.py") as p:
        yield p


@asynccontextmanager
async def asked(home: Path, peer: HttpPeer, tool: str, arguments: dict[str, Any]
                ) -> AsyncIterator[tuple[Http, aiohttp.ClientSession, str, dict[str, Any]]]:
    """A daemon with the tasks peer as server `t`, a call of `tool` made a task, and its first question, open."""
    with make_daemon(home, {"servers": {"t": {"url": peer.url}}}, listen=f"127.0.0.1:{free_port()}") as d:
        w = Http(d)
        async with d.session() as rest:
            tid = (await handle_of(w, tool, arguments))["taskId"]
            (q,) = await until_pending(rest, session="s1")
            yield w, rest, tid, q


async def test_a_task_rides_an_upstream_task_end_to_end(home: Path, tasks_peer: HttpPeer) -> None:
    async with asked(home, tasks_peer, "t_confirm_only", {"what": "ship"}) as (w, rest, tid, q):
        got = ok(await w.request("tasks/get", {"taskId": tid}))
        assert got["status"] == "input_required"
        assert got["inputRequests"] == {q["id"]: {"method": "elicitation/create", "params": {
            "message": "t (via mcpx) asks: Really ship?", "mode": "form",
            "requestedSchema": q["requestedSchema"]}}}
        yes = {q["id"]: {"action": "accept", "content": {"confirm": True}}}
        assert ok(await w.request("tasks/update", {"taskId": tid, "inputResponses": yes}))["resultType"] == \
            "complete"
        await result(rest, tid)
        done = ok(await w.request("tasks/get", {"taskId": tid}))
        assert done["status"] == "completed", done
        # the server's task received exactly the answer given to mcpx's
        assert tool_json(done["result"]) == {"ok": {"action": "accept", "content": {"confirm": True}}}


async def test_tasks_cancel_ends_the_call_and_the_upstream_task(home: Path, tasks_peer: HttpPeer) -> None:
    async with asked(home, tasks_peer, "t_deploy", {"env": "prod"}) as (w, rest, tid, q):
        assert ok(await w.request("tasks/cancel", {"taskId": tid}))["resultType"] == "complete"
        got = ok(await w.request("tasks/get", {"taskId": tid}))
        assert got["status"] == "cancelled" and "tasks/cancel" in got["statusMessage"]
        async with rest.get(f"/v1/elicit/{q['id']}") as r:
            assert (await r.json())["elicitation"]["state"] == "abandoned"
        upstream = await peer_task(tasks_peer, upstream_task(q))
        assert upstream["status"] == "cancelled", upstream


async def test_on_mcp_server_a_call_is_a_task_exactly_when_the_server_makes_it_one(home: Path,
                                                                                    tasks_peer: HttpPeer) -> None:
    """/mcp/t: the request's declaration reaches the server, which alone decides; a call it made a task is mcpx's
    task at once, its question answerable from any other door, and the server's task gets that answer."""
    with make_daemon(home, {"servers": {"t": {"url": tasks_peer.url}}}, listen=f"127.0.0.1:{free_port()}") as d:
        w = Http(d, "/mcp/t")
        assert ok(await w.request("server/discover", {}))["capabilities"]["extensions"] == {TASKS: {}}
        plain = ok(await w.request("tools/call", {"name": "plain", "arguments": {"x": 1}}))
        assert plain["resultType"] == "complete" and "taskId" not in plain, plain
        # a task-optional tool the server runs as a task, declared; as a plain call, not declared
        not_declared = declaring(tasks=False)
        quick = ok(await w.request("tools/call", {"name": "quick", "arguments": {"x": 2}}, not_declared))
        assert quick["resultType"] == "complete" and "taskId" not in quick, quick
        async with d.session() as rest:
            tid = (await handle_of(w, "confirm_only", {"what": "ship"}))["taskId"]
            (q,) = await until_pending(rest, session="s1")
            assert q["server"] == "t" and q["task"] == tid
            refused = await w.request("tasks/get", {"taskId": tid}, not_declared)
            assert refused["error"]["code"] == -32021, refused
            got = ok(await w.request("tasks/get", {"taskId": tid}))
            assert got["status"] == "input_required" and list(got["inputRequests"]) == [q["id"]]
            assert (await answer(rest, q["id"], "accept", {"confirm": True}))[0] == 200
            await result(rest, tid)
            done = ok(await w.request("tasks/get", {"taskId": tid}))
            assert done["status"] == "completed", done
            assert tool_json(done["result"]) == {"ok": {"action": "accept", "content": {"confirm": True}}}
            async with rest.get(f"/v1/elicit/{q['id']}") as r:
                assert (await r.json())["answer"]["by"] == "person:rest"
