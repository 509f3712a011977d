"""The call scope (upstream/kind.py's `CallScope`) the gateway hands a kind of upstream other than MCP: mcpx's own
questions and confirmations in the call, its deadline, progress to whoever follows it, credentials scrubbed.

A hook until the gateway runs every kind through one scope (issue 36): the service kinds (mcpx/services/kinds.py)
are written against the interface alone, so only this module goes when that lands.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcpx.broker.models import Answer
from mcpx.config import ServerConfig
from mcpx.upstream.calls import CallFailed, CallRequest, CallTask
from mcpx.upstream.deadline import PausableDeadline
from mcpx.upstream.kind import Question

Ask = Callable[[CallTask, Question], Awaitable[Answer]]
Confirm = Callable[[CallTask, str, Mapping[str, Any]], Awaitable[None]]


class KindScope:
    def __init__(self, task: CallTask, entry: ServerConfig, ask: Ask, confirm: Confirm) -> None:
        self._task, self._entry, self._ask, self._confirm = task, entry, ask, confirm
        self._deadline = PausableDeadline(entry.timeout)

    @property
    def id(self) -> str:
        return self._task.id

    @property
    def request(self) -> CallRequest:
        return self._task.request

    @property
    def entry(self) -> ServerConfig:
        return self._entry

    @property
    def deadline(self) -> PausableDeadline:
        return self._deadline

    async def ask(self, question: Question) -> Answer:
        return await self._ask(self._task, question)

    async def confirm(self, summary: str, exact: Mapping[str, Any]) -> None:
        await self._confirm(self._task, summary, exact)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        r = self._task.request
        token = (r.meta or {}).get("progressToken")
        if r.relay is not None and token is not None:
            params: dict[str, Any] = {"progressToken": token, "progress": progress}
            params.update({k: v for k, v in (("total", total), ("message", message)) if v is not None})
            await r.relay("notifications/progress", params)

    def secret(self, value: str) -> None:
        self._task.secrets.add(value)

    async def remember(self, state: Mapping[str, Any]) -> None:
        # no kind served through this hook remembers anything; one that did could not be continued after a restart
        raise CallFailed(f"{self.request.server}.{self.request.tool}: this daemon does not keep a "
                         f"{type(self._entry).__name__} call's state across a restart")
