"""What an upstream connection tells the parts above it, as two Protocols.

- `ServerToCall`: what a server sends about one call in flight, and asks of it (its questions, roots,
  progress). Its one implementation is `upstream/mcp_call.py`'s `McpCallHooks`, which opens the questions
  through the broker; `UpstreamConnection.call_tool` is handed one per call.
- `ConnectionEvents`: what one connection tells whoever keeps it (the pool, `upstream/pool.py`): what a
  tool's calls were seen to do, that nothing the server asked is pending any more, that its tools changed.
  Given to `UpstreamConnection` when it is made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mcpx.mcp.input_required import InputRequired
from mcpx.mcp.protocol import ElicitParams


class ServerToCall(Protocol):
    """What a call in flight offers its server: questions, roots, progress. Implemented by `mcp_call.McpCallHooks`."""

    async def ask(self, params: ElicitParams, reply: Callable[[dict[str, Any]], bool] | None = None,
                  ) -> dict[str, Any]:
        """A legacy server's `elicitation/create`: the ElicitResult, once the question is answered. `reply` writes the
        request's reply at once (False if it cannot): the answer may go by it, and what this returns is then not
        written again."""
        ...

    async def answer_round(self, asked: InputRequired, round_no: int) -> dict[str, Any]:
        """A modern round's `inputRequests` (mcp/input_required.py's `drive` asks): the retry's `inputResponses`, once
        every request is answered."""
        ...

    async def following(self, task_id: str) -> None:
        """The server made the call a task (or a restart follows it again): kept with the call, so a restart finds
        it; from now on each of the server's answers is bounded on its own, not the call as a whole."""
        ...

    async def answer_input(self, key: str, request: Any) -> dict[str, Any]:
        """One of a task's `inputRequests`, handed over once for the task's life (mcp/tasks.py's `follow`): the
        response `tasks/update` carries under `key`, once answered."""
        ...

    async def withdrawn(self, key: str) -> None:
        """The task stopped listing `key` before its answer was sent: its question is no longer the server's."""
        ...

    def keeps_going(self) -> bool:
        """The call stops here but its work goes on (the daemon is stopping; the next one takes it up)."""
        ...

    async def complete(self, elicitation_id: str) -> None:
        """`notifications/elicitation/complete`: a url-mode question's out-of-band step finished."""
        ...

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """A notification about this call (progress, log messages), for whoever called."""
        ...

    async def client_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """roots/list or sampling/createMessage: to the calling client if it serves it, else mcpx's own answer."""
        ...

    def fixed_answer(self, method: str) -> dict[str, Any] | None:
        """The answer to `method` this call gives without asking anyone (mcpx's own roots), or None."""
        ...

    def roots(self) -> list[dict[str, Any]]: ...


class ConnectionEvents(Protocol):
    """What one connection tells whoever keeps it (the pool): given to `UpstreamConnection` when it is made."""

    def learnt(self, tool: str, asks: bool) -> None:
        """What a call of `tool` was seen to do: asked something (or may have), or finished without asking."""
        ...

    def nothing_pending(self) -> None:
        """Nothing the server asked is pending any more: a call held back from this instance may take it."""
        ...

    def tools_changed(self) -> Awaitable[None]:
        """The server said its tool list changed (notifications/tools/list_changed); awaited before the next
        notification is read."""
        ...


@dataclass(frozen=True)
class Events:
    """ConnectionEvents made of three functions (the pool's, bound to one server)."""

    learnt: Callable[[str, bool], None]
    nothing_pending: Callable[[], None]
    tools_changed: Callable[[], Awaitable[None]]
