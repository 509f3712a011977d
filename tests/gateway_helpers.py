"""Helpers for tests that put real MCP servers behind a real daemon."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from conftest import loud_skip
from forks import fork_server
from harness import PATIENCE, PEERS, ROOT, free_port, listening, stop_process, wait_started

PY = sys.executable
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"


def stdio(script: str, *args: str, direct: bool = False, **extra: Any) -> dict[str, Any]:
    """A server entry for a peer on stdio: forked by this worker's fork server (the SDK already imported, see
    docs/choices.md), or, with `direct` (a test of the server's own process: its pid, tree, group, start) or
    MCPX_TEST_PEERS=direct (debugging a peer), `python PEER.py` itself."""
    require_peer(script)
    if direct or os.environ.get("MCPX_TEST_PEERS") == "direct":
        return {"command": PY, "args": [str(PEERS / script), *args], **extra}
    command, argv = fork_server().command(PEERS / script, args)
    return {"command": command, "args": argv, **extra}


# a peer that needs a package the test extras cannot name (./dev installs it on its own), and that package
NEEDS = {"tasks_server.py": ("fastmcp_tasks", "fastmcp-tasks (./dev test installs it: its tasks_peer step)")}


def require_peer(script: str) -> None:
    """A peer whose package is missing here is a loud skip (under CI a failure), not its import error."""
    if script in NEEDS and importlib.util.find_spec(NEEDS[script][0]) is None:
        loud_skip(f"{script} cannot run: {NEEDS[script][1]} is not installed")


class HttpPeer:
    """An SDK server on Streamable HTTP, run by the test (so it outlives a daemon's kill -9)."""

    def __init__(self, script: str) -> None:
        self.port = free_port()
        # a pipe nobody reads would stall a chatty server; the file lives as long as the server (closed in stop)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115
        entry = stdio(script, "--http", str(self.port))  # forked too: it stands in for the peer, signals and all
        self.proc = subprocess.Popen([entry["command"], *entry["args"]], stdout=subprocess.DEVNULL, stderr=self.log)
        try:
            wait_started(self.proc, lambda: listening(self.port), f"{script} on port {self.port}", PATIENCE,
                         self.stderr, interval=0.05)
        except BaseException:
            self.log.close()
            raise

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-2000:]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()

    def __enter__(self) -> HttpPeer:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def node_available() -> bool:
    return EVERYTHING.exists() and shutil.which("node") is not None


async def call(http: aiohttp.ClientSession, server: str, tool: str, arguments: dict[str, Any] | None = None,
               **body: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
    async with http.post(f"/v1/call/{server}/{tool}", json={"arguments": arguments or {}, **body}) as r:
        return r.status, await r.json(), dict(r.headers)


async def result(http: aiohttp.ClientSession, task: str, timeout: float = PATIENCE) -> dict[str, Any]:
    async with http.get(f"/v1/tasks/{task}/result", params={"timeout": str(timeout)}) as r:
        body = await r.json()
        assert r.status == 200, body
        return body


async def answer(http: aiohttp.ClientSession, eid: str, action: str, content: Any = None, **headers: str
                 ) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {} if content is None else {"content": content}
    async with http.post(f"/v1/elicit/{eid}/{action}", json=body, headers=headers) as r:
        return r.status, await r.json()


def tool_text(task_doc: dict[str, Any]) -> Any:
    """The JSON a test peer put in its text result (what the upstream received)."""
    content = task_doc["result"]["content"]
    return json.loads(content[0]["text"])


async def until_pending(http: aiohttp.ClientSession, count: int = 1, timeout: float = PATIENCE, **filters: str
                        ) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        async with http.get("/v1/elicit", params=filters) as r:
            qs = (await r.json())["elicitations"]
        if len(qs) >= count:
            return qs
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {count} pending question(s), have {len(qs)}")
        await asyncio.sleep(0.05)


async def until_health(http: aiohttp.ClientSession, holds: Callable[[dict[str, Any]], bool],
                       timeout: float = PATIENCE) -> dict[str, Any]:
    """GET /v1/health until `holds` is true of it (a config reload is seen); the last one either way."""
    deadline = time.monotonic() + timeout
    while True:
        async with http.get("/v1/health") as r:
            health: dict[str, Any] = await r.json()
        if holds(health) or time.monotonic() > deadline:
            return health
        await asyncio.sleep(0.05)
