"""Upstream tasks (the Tasks extension, SEP-2663): mcpx as the client of a FastMCP server with fastmcp-tasks.

The server (peers/tasks_server.py) makes a call a task and asks through it: `tasks/get` lists its requests,
mcpx turns each key into one question (its key kept as upstreamId), and answers with `tasks/update`. Over
Streamable HTTP the task outlives the daemon; over stdio it dies with the server's process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import audited, events
from gateway_helpers import HttpPeer, answer, call, result, stdio, tool_text, until_pending
from harness import PATIENCE, Daemon, make_daemon

TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    with HttpPeer("tasks_server.py") as p:
        yield p


def servers(kind: str, peer: HttpPeer | None, **extra: Any) -> dict[str, Any]:
    entry = {"url": peer.url} if kind == "http" and peer is not None else stdio("tasks_server.py")
    return {"servers": {"t": {**entry, **extra}}}


async def question(http: aiohttp.ClientSession, session: str, where: str) -> dict[str, Any]:
    """The pending question of `session` whose message holds `where`, once it is open (bounded)."""
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while True:
        for q in await until_pending(http, session=session):
            if where in q["message"]:
                return q
        assert asyncio.get_running_loop().time() < deadline, f"no pending question {where!r}"
        await asyncio.sleep(0.05)


async def opened(http: aiohttp.ClientSession, trace: str) -> list[str]:
    async with http.get("/v1/audit", params={"trace": trace}) as r:
        return [rec["elicit"] for rec in (await r.json())["records"] if rec["kind"] == "elicit.open"]


async def peer_task(peer: HttpPeer, task_id: str) -> dict[str, Any]:
    """tasks/get straight to the peer, as a client declaring the extension (to see what the server holds)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tasks/get", "Mcp-Name": task_id}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta}}
    async with aiohttp.ClientSession() as s, s.post(peer.url, json=body, headers=headers) as r:
        text = await r.text()
    if "data:" in text:
        text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
    reply: dict[str, Any] = json.loads(text)
    return reply["result"]


def upstream_task(q: dict[str, Any]) -> str:
    """The server's task id, from the key mcpx kept as the question's upstreamId: fastmcp-tasks keys a task's
    requests `<taskId>:<hex>` (that peer's way, not the spec's)."""
    key: str = q["upstreamId"]
    return key.rsplit(":", 1)[0]


@pytest.mark.parametrize("kind", ["http", "stdio"])
async def test_a_task_asks_a_confirmation_a_form_and_a_url_consent(home: Path, kind: str) -> None:
    with HttpPeer("tasks_server.py") as peer, make_daemon(home, servers(kind, peer)) as d:
        async with d.session() as http:
            status, body, _ = await call(http, "t", "deploy", {"env": "prod"}, session="s1")
            assert status in (200, 202), body
            confirm = await question(http, "s1", "Deploy to prod?")
            assert confirm["server"] == "t" and confirm["task"] == body["task"]
            assert confirm["upstreamId"].startswith(upstream_task(confirm) + ":")  # the server's key, kept
            # answered from the CLI
            done = d.cli("elicit", "answer", confirm["id"], "confirm=true")
            assert done.returncode == 0, done.stderr
            form = await question(http, "s1", "Where, and how many?")
            consent = await question(http, "s1", "Sign in to the registry")
            assert consent["mode"] == "url" and consent["url"] == "https://registry.example/login"
            # one over REST, validated like any question: a replica count out of range is refused
            status, refused = await answer(http, form["id"], "accept", {"region": "eu", "replicas": 12})
            assert status == 422, refused
            assert (await answer(http, form["id"], "accept", {"region": "eu", "replicas": 3}))[0] == 200
            assert d.cli("elicit", "answer", consent["id"]).returncode == 0
            doc = await result(http, body["task"])
            assert doc["state"] == "completed", doc
            given = tool_text(doc)
            assert given["deployed"] is True and given["env"] == "prod"
            assert given["given"]["confirm"] == {"action": "accept", "content": {"confirm": True}}
            assert given["given"]["form"] == {"action": "accept", "content": {"region": "eu", "replicas": 3}}
            assert given["given"]["consent"]["action"] == "accept"
            # polled every 200 ms while people answered: each key was one question, once
            await audited(http, "task.done", trace=body["trace"])
            assert sorted(await opened(http, body["trace"])) == sorted([confirm["id"], form["id"], consent["id"]])


async def test_an_expired_task_question_answers_cancel(home: Path, peer: HttpPeer) -> None:
    with make_daemon(home, servers("http", peer, elicit={"ttl": "1s"})) as d:
        async with d.session() as http:
            _, body, _ = await call(http, "t", "confirm_only", {"what": "wait"}, session="e1")
            q = await question(http, "e1", "Really wait?")
            doc = await result(http, body["task"])
            async with http.get(f"/v1/elicit/{q['id']}") as r:
                assert (await r.json())["elicitation"]["state"] == "expired"
            assert doc["state"] == "completed", doc
            got = tool_text(doc)["ok"]
            assert got["action"] == "cancel"  # never decline
            assert "nobody answered" in got["_meta"]["io.mcpx/reason"]


async def test_cancelling_the_call_cancels_the_servers_task(home: Path, peer: HttpPeer) -> None:
    with make_daemon(home, servers("http", peer)) as d:
        async with d.session() as http:
            _, body, _ = await call(http, "t", "confirm_only", {"what": "stop"}, session="c1")
            q = await question(http, "c1", "Really stop?")
            assert (await peer_task(peer, upstream_task(q)))["status"] == "input_required"
            out = d.cli("task", "cancel", body["task"])
            assert out.returncode == 0, out.stderr
            doc = await result(http, body["task"])
            assert doc["state"] == "cancelled", doc
            async with http.get(f"/v1/elicit/{q['id']}") as r:
                assert (await r.json())["elicitation"]["state"] == "abandoned"
            # tasks/cancel went before the call ended: the server's task says so
            assert (await peer_task(peer, upstream_task(q)))["status"] == "cancelled"


async def deploy_then_kill9(d: Daemon, env: str, session: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Call deploy, and kill -9 the daemon once its task asks; then start it again: (the call, its question)."""
    async with d.session() as http:
        _, body, _ = await call(http, "t", "deploy", {"env": env}, session=session)
        confirm = await question(http, session, f"Deploy to {env}?")
    d.kill9()
    d.restart()
    return body, confirm


async def test_an_http_task_is_followed_again_after_a_kill9(home: Path, peer: HttpPeer) -> None:
    with make_daemon(home, servers("http", peer)) as d:
        body, confirm = await deploy_then_kill9(d, "stage", "k1")
        async with d.session() as http:
            async with http.get(f"/v1/elicit/{confirm['id']}") as r:
                assert (await r.json())["elicitation"]["state"] == "pending"  # the same question, answerable
            assert d.cli("elicit", "answer", confirm["id"], "confirm=true").returncode == 0
            form = await question(http, "k1", "Where, and how many?")
            consent = await question(http, "k1", "Sign in to the registry")
            assert (await answer(http, form["id"], "accept", {"region": "us", "replicas": 1}))[0] == 200
            assert (await answer(http, consent["id"], "decline"))[0] == 200
            got = d.cli("task", "result", body["task"], "--json", "--timeout", str(PATIENCE))
            assert got.returncode == 0, got.stderr
            doc = json.loads(got.stdout)
            given = tool_text(doc)
            assert given["deployed"] is True and given["env"] == "stage"
            assert given["given"]["form"]["content"] == {"region": "us", "replicas": 1}
            assert given["given"]["consent"] == {"action": "decline"}
            await audited(http, "task.done", trace=body["trace"])
            assert len(await opened(http, body["trace"])) == 3  # the confirmation was not asked again


async def test_a_stdio_task_ends_with_its_process(home: Path) -> None:
    with make_daemon(home, servers("stdio", None)) as d:
        body, confirm = await deploy_then_kill9(d, "dev", "p1")
        async with d.session() as http, events(http, after=0, kinds="task.done") as stream:
            await stream.until(lambda rec: rec["task"] == body["task"])
            doc = await result(http, body["task"])
            assert doc["state"] == "failed"
            assert "stdio server's task lives in its process" in doc["error"], doc["error"]
            async with http.get(f"/v1/elicit/{confirm['id']}") as r:
                q = (await r.json())["elicitation"]
            assert q["state"] == "abandoned" and "stdio server's task" in q["stateReason"], q

