"""The CLI's way to the daemon: its unix socket, or MCPX_DAEMON_URL with the bearer token.

The CLI never opens SQLite itself — answers must go through the daemon so waiters wake
and events are published.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from mcpx.daemon.launch import LaunchError, ensure_daemon
from mcpx.shared import sse
from mcpx.shared.errors import McpxError
from mcpx.system import agentshell
from mcpx.system.paths import StatePaths

EX_UNAVAILABLE = 69


class NoDaemon(McpxError):
    def __init__(self, where: str, detail: str = "") -> None:
        hint = "start one with `mcpx daemon` (or `mcpx daemon --listen 127.0.0.1:PORT` for TCP)"
        super().__init__(f"no mcpx daemon answers on {where}{': ' + detail if detail else ''}; {hint}")


class ApiError(McpxError):
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        err = body.get("error", {}) if isinstance(body, dict) else {}
        self.code = err.get("code", "error")
        self.fields: dict[str, str] = err.get("fields") or {}
        super().__init__(err.get("message") or f"HTTP {status}")


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str]


def agent_environment() -> bool:
    """Is this CLI run by an agent (opencode sets AGENT=1 for the processes its tools start)?

    Its parents count too, as they do for the daemon, which refuses a person's answer from such a
    process: the CLI then answers as an agent rather than be refused.
    """
    if agentshell.mark_of(os.environ) is not None:
        return True
    if not agentshell.proc_available():
        return False
    try:
        return agentshell.marked_lineage(os.getpid()) is not None
    except agentshell.ProcessUnseen:
        return False


def default_headers() -> dict[str, str]:
    headers = {"X-Mcpx-Cwd": os.getcwd()}  # no pid: the daemon asks the kernel for it
    if session := os.environ.get("MCPX_SESSION_ID"):
        headers["X-Mcpx-Session"] = session
        headers["X-Mcpx-Session-Source"] = "env"
    return headers


def ensure_running(what: str) -> None:
    """Start a detached daemon for this state directory, as `mcpx serve`, doctor and scripts do, unless one answers
    already or MCPX_DAEMON_URL names one elsewhere (not ours to start); said on stderr when one was started.
    NoDaemon when none would start, with why."""
    if os.environ.get("MCPX_DAEMON_URL"):
        return
    paths = StatePaths.current()
    try:
        started = ensure_daemon(paths, what=what)
    except LaunchError as exc:
        raise NoDaemon(str(paths.socket), f"none ran, and one would not start: {exc}") from None
    if started:
        print("mcpx: no daemon was running; started one (`mcpx daemon stop` stops it)", file=sys.stderr, flush=True)


class DaemonClient:
    def __init__(self, paths: StatePaths | None = None, base_url: str | None = None, token: str | None = None,
                 answerer: str | None = None) -> None:
        self.paths = paths or StatePaths.current()
        self.base_url = (base_url or os.environ.get("MCPX_DAEMON_URL") or "").rstrip("/") or None
        self._token = token or os.environ.get("MCPX_TOKEN")
        self.answerer = answerer or ("agent:cli" if agent_environment() else "person:cli")
        self._session: aiohttp.ClientSession | None = None

    @property
    def where(self) -> str:
        return self.base_url or str(self.paths.socket)

    async def __aenter__(self) -> DaemonClient:
        headers = default_headers()
        if self.base_url:
            token = self._token
            if token is None and self.paths.token.exists():
                token = self.paths.token.read_text().strip()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self._session = aiohttp.ClientSession(self.base_url, headers=headers)
        else:
            connector = aiohttp.UnixConnector(path=str(self.paths.socket))
            self._session = aiohttp.ClientSession("http://mcpx", connector=connector, headers=headers)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(self, method: str, path: str, *, json_body: Any = None, params: dict[str, Any] | None = None,
                      timeout: float = 30.0, headers: dict[str, str] | None = None,
                      ok: tuple[int, ...] = ()) -> Response:
        assert self._session is not None, "use `async with DaemonClient()`"
        clean = {k: str(v) for k, v in (params or {}).items() if v is not None}
        try:
            async with self._session.request(method, path, json=json_body, params=clean, headers=headers,
                                             timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                text = await resp.text()
                body: Any = json.loads(text) if text and resp.content_type == "application/json" else text
                if resp.status >= 400 and resp.status not in ok:
                    raise ApiError(resp.status, body)
                return Response(resp.status, body, dict(resp.headers))
        except (aiohttp.ClientConnectorError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(self.where, str(getattr(exc, "os_error", exc) or "")) from None
        except aiohttp.ServerDisconnectedError:
            raise NoDaemon(self.where, "it closed the connection (stopping?)") from None

    async def get(self, path: str, **kw: Any) -> Any:
        return (await self.request("GET", path, **kw)).body

    async def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return (await self.request("POST", path, json_body=body if body is not None else {}, **kw)).body

    async def answer(self, eid: str, action: str, content: dict[str, Any] | None = None,
                     reason: str | None = None) -> Any:
        body: dict[str, Any] = {}
        if content is not None:
            body["content"] = content
        if reason:
            body["reason"] = reason
        return await self.post(f"/v1/elicit/{eid}/{action}", body, headers={"X-Mcpx-Answerer": self.answerer})

    async def events(self, kinds: str | None = None, session: str | None = None,
                     last_event_id: int | None = None) -> AsyncIterator[tuple[int | None, str, Any]]:
        """(id, event, data) per SSE frame, until the stream ends."""
        assert self._session is not None
        params = {k: v for k, v in {"kinds": kinds, "session": session}.items() if v}
        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
        try:
            async with self._session.get("/v1/events", params=params, headers=headers,
                                         timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as resp:
                if resp.status >= 400:
                    raise ApiError(resp.status, await resp.json())
                async for event in sse.read(resp.content):
                    event_id = int(event.id) if event.id is not None and event.id.isdigit() else None
                    if event.data is None:
                        yield event_id, "", None  # an id-only frame: where the stream starts
                        continue
                    try:
                        payload: Any = json.loads(event.data)
                    except json.JSONDecodeError:
                        payload = event.data
                    yield event_id, event.event, payload
        except (aiohttp.ClientConnectorError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(self.where, str(exc)) from None


async def wait_for_answer(eid: str, seconds: float, paths: StatePaths | None = None) -> dict[str, Any] | None:
    """The question's answer once it has one (an expiry is the answer cancel), waiting up to `seconds` through the
    daemon's restarts: the question is durable. None if none came in time; ApiError 410 if it was abandoned.
    `paths`: the daemon's home (by default this environment's)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        wait = max(1.0, min(30.0, deadline - time.monotonic()))
        try:
            async with DaemonClient(paths) as client:
                resp = await client.request("GET", f"/v1/elicit/{eid}/wait", params={"timeout": wait},
                                            timeout=wait + 10)
        except NoDaemon:
            await asyncio.sleep(1)  # the daemon restarts; the question waits in its store
            continue
        if resp.status == 200:
            return dict(resp.body)
    return None
