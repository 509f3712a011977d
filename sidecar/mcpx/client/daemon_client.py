"""The daemon's API for asyncio code, on aiohttp: the event stream (`mcpx elicit watch`, the TUI), scripts
(`mcpx.Client`), and the commands that wait on a question while doing other things. A command that only asks and
prints uses transport.DaemonApi, which starts without aiohttp (or asyncio)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import aiohttp

from mcpx.client.transport import (
    RESTART_PAUSE,
    ApiError,
    ApiResponse,
    DaemonAddress,
    NoDaemon,
    answer_body,
    answer_wait_step,
)
from mcpx.shared import sse
from mcpx.system.paths import StatePaths

if TYPE_CHECKING:
    from mcpx.client.replies import AnswerDoc


class DaemonClient:
    def __init__(self, paths: StatePaths | None = None, base_url: str | None = None, token: str | None = None,
                 answerer: str | None = None) -> None:
        self.endpoint = DaemonAddress.of(paths, base_url, token, answerer)
        self.paths = self.endpoint.paths
        self.base_url = self.endpoint.base_url
        self.answerer = self.endpoint.answerer
        self._session: aiohttp.ClientSession | None = None

    @property
    def where(self) -> str:
        return self.endpoint.where

    async def __aenter__(self) -> DaemonClient:
        headers = self.endpoint.headers()
        if self.base_url:
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
                      ok: tuple[int, ...] = ()) -> ApiResponse:
        assert self._session is not None, "use `async with DaemonClient()`"
        clean = {k: str(v) for k, v in (params or {}).items() if v is not None}
        try:
            async with self._session.request(method, path, json=json_body, params=clean, headers=headers,
                                             timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                text = await resp.text()
                body: Any = json.loads(text) if text and resp.content_type == "application/json" else text
                if resp.status >= 400 and resp.status not in ok:
                    raise ApiError(resp.status, body)
                return ApiResponse(resp.status, body, dict(resp.headers))
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
        return await self.post(f"/v1/elicit/{eid}/{action}", answer_body(content, reason),
                               headers={"X-Mcpx-Answerer": self.answerer})

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


async def wait_for_answer(eid: str, seconds: float, paths: StatePaths | None = None) -> AnswerDoc | None:
    """The question's answer once it has one (an expiry is the answer cancel), waiting up to `seconds` through the
    daemon's restarts: the question is durable. None if none came in time; ApiError 410 if it was abandoned.
    `paths`: the daemon's home (by default this environment's)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        wait = answer_wait_step(deadline)
        try:
            async with DaemonClient(paths) as client:
                resp = await client.request("GET", f"/v1/elicit/{eid}/wait", params={"timeout": wait},
                                            timeout=wait + 10)
        except NoDaemon:
            await asyncio.sleep(RESTART_PAUSE)  # the daemon restarts; the question waits in its store
            continue
        if resp.status == 200:
            answer: AnswerDoc = resp.body
            return answer
    return None
