"""opencode V2, with a stand-in: the official mcp SDK client through `mcpx serve`, declaring exactly what V2's MCP
client declares and behaving as its form service does.

What V2 does (read from its source, anomalyco/opencode packages/core/src/mcp/client.ts, elicitation.ts and
form.ts; V2 itself is not installable here): its client declares `{elicitation: {form: {applyDefaults: true},
url: {}}, roots: {}}`; it draws each elicitation as a native form kept in memory; a form ends answered
(`accept`) or cancelled (`cancel`), never `decline`; when V2 shuts down, every pending form is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp_types import ElicitResult, JSONRPCRequest, ListRootsResult, Root

from conftest import PATIENCE, Daemon, audited, make_daemon
from gateway_helpers import stdio

V2_CAPABILITIES = {"elicitation": {"form": {"applyDefaults": True}, "url": {}}, "roots": {}}


class DeclaresAsV2:
    """The SDK client's write stream, with its initialize declaring V2's capabilities to the letter (the SDK's
    own ad has no applyDefaults)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: SessionMessage) -> None:
        msg = item.message
        if isinstance(msg, JSONRPCRequest) and msg.method == "initialize":
            item = SessionMessage(msg.model_copy(update={"params": {**(msg.params or {}),
                                                                     "capabilities": V2_CAPABILITIES}}), item.metadata)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> DeclaresAsV2:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def v2_transport(params: StdioServerParameters) -> AsyncIterator[tuple[Any, Any]]:
    async with stdio_client(params) as (read, write):
        yield read, DeclaresAsV2(write)


async def roots(_ctx: Any) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri=Path.cwd().as_uri())])  # V2 answers with its directory


@asynccontextmanager
async def v2_client(d: Daemon, on_elicit: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcpx", "serve"], env=d.env, cwd=str(d.home))
    async with Client(v2_transport(params), mode="legacy", elicitation_callback=on_elicit,
                      list_roots_callback=roots) as client:
        yield client


@pytest.fixture
def daemon(home: Path) -> Any:
    with make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}}) as d:
        yield d


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def test_questions_reach_a_v2_like_client_natively_and_its_answers_are_kept(daemon: Daemon) -> None:
    asked: list[Any] = []

    async def form(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params)
        if getattr(params, "mode", None) == "url":
            return ElicitResult(action="accept")  # the person confirmed the external step
        return ElicitResult(action="accept", content={"repo": "v2/form"})

    async with v2_client(daemon, form) as client:
        result = await client.call_tool("sdk_need_repo", {})
        login = await client.call_tool("sdk_login", {})
    assert json.loads(text(result)) == {"action": "accept", "data": {"repo": "v2/form"}}
    assert json.loads(text(login)) == {"action": "accept"}
    assert asked[0].message == "sdk (via mcpx) asks: Which repository should this go in?"
    assert asked[0].requested_schema["properties"]["repo"]["type"] == "string"
    assert (asked[1].mode, asked[1].url) == ("url", "https://example.com/login?x=1")
    async with daemon.session() as http:
        for record in [await audited(http, "elicit.answered", trace=t) for t in await traces(http)]:
            assert (record["data"]["action"], record["data"]["by"]) == ("accept", "person:mcp-client")
        async with http.get("/v1/elicit", params={"state": "answered"}) as r:
            kept = (await r.json())["elicitations"]
    assert sorted(q["mode"] for q in kept) == ["form", "url"]  # the durable record, though V2 kept forms in memory


async def traces(http: Any) -> list[str]:
    async with http.get("/v1/audit", params={"kinds": "elicit.open"}) as r:
        return [rec["trace"] for rec in (await r.json())["records"]]


async def test_a_v2_like_client_cancelling_its_forms_at_shutdown_is_a_cancel_not_a_decline(daemon: Daemon) -> None:
    shutting_down = asyncio.Event()

    async def form(_ctx: Any, _params: Any) -> ElicitResult:
        await shutting_down.wait()
        return ElicitResult(action="cancel")  # V2's form service, at shutdown: every pending form cancelled

    async with v2_client(daemon, form) as client:
        call = asyncio.create_task(client.call_tool("sdk_need_repo", {}))
        async with daemon.session() as http:
            opened = await audited(http, "elicit.open")
            shutting_down.set()
            result = await asyncio.wait_for(call, PATIENCE)
            answered = await audited(http, "elicit.answered", elicit=opened["elicit"])
    assert json.loads(text(result)) == {"action": "cancel", "data": None}  # what the server hears: not now
    assert (answered["data"]["action"], answered["data"]["by"]) == ("cancel", "person:mcp-client")


async def test_an_answer_given_elsewhere_withdraws_the_v2_like_clients_form(daemon: Daemon) -> None:
    drawn, withdrawn = asyncio.Event(), asyncio.Event()

    async def form(_ctx: Any, _params: Any) -> ElicitResult:
        drawn.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # the SDK's handler task, ended by the server's notifications/cancelled
            withdrawn.set()
            raise
        return ElicitResult(action="cancel")

    async with v2_client(daemon, form) as client:
        call = asyncio.create_task(client.call_tool("sdk_need_repo", {}))
        await asyncio.wait_for(drawn.wait(), PATIENCE)
        async with daemon.session() as http:
            opened = await audited(http, "elicit.open")
        answer = await asyncio.to_thread(daemon.cli, "elicit", "answer", opened["elicit"], "repo=from/terminal")
        assert answer.returncode == 0, answer.stderr
        result = await asyncio.wait_for(call, PATIENCE)
        await asyncio.wait_for(withdrawn.wait(), PATIENCE)
    assert json.loads(text(result)) == {"action": "accept", "data": {"repo": "from/terminal"}}


def serve_processes() -> list[int]:
    """The `mcpx serve` processes this test process started (the SDK's stdio transport does not say)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if parent == os.getpid() and b"mcpx" in argv and b"serve" in argv:
                found.append(int(entry.name))
    return found


async def test_a_v2_like_client_gone_without_answering_leaves_the_question_to_the_terminal(daemon: Daemon) -> None:
    """V2 stopped without cancelling its forms (a crash, or its transport closed before its forms' finalizer
    ran): the question stays open, the person answers it from a terminal, and the call completes."""
    asked = asyncio.Event()

    async def form(_ctx: Any, _params: Any) -> ElicitResult:
        asked.set()
        await asyncio.Event().wait()  # drawn, never answered
        return ElicitResult(action="cancel")

    connection = v2_client(daemon, form)
    client = await connection.__aenter__()
    try:
        call = asyncio.create_task(client.call_tool("sdk_need_repo", {}))
        await asyncio.wait_for(asked.wait(), PATIENCE)
        for pid in serve_processes():
            os.kill(pid, signal.SIGKILL)  # the host is gone at once: nothing is answered, nothing cancelled
        with contextlib.suppress(Exception):
            await asyncio.wait_for(call, PATIENCE)  # ends with the connection: the result is not V2's to see now
    finally:
        with contextlib.suppress(Exception):  # the SDK client's own end, its server killed under it
            async with asyncio.timeout(PATIENCE):
                await connection.__aexit__(None, None, None)
    async with daemon.session() as http:
        opened = await audited(http, "elicit.open")
    answer = daemon.cli("elicit", "answer", opened["elicit"], "repo=person/cli")
    assert answer.returncode == 0, answer.stdout + answer.stderr
    done = daemon.cli("task", "result", opened["task"], "--json", "--timeout", str(PATIENCE))
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["state"] == "completed"
    assert json.loads(doc["result"]["content"][0]["text"]) == {"action": "accept", "data": {"repo": "person/cli"}}
    async with daemon.session() as http:
        answered = await audited(http, "elicit.answered", elicit=opened["elicit"])
    assert answered["data"]["by"] == "person:cli"
