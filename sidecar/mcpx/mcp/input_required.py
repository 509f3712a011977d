"""A modern call's rounds (protocol 2026-07-28): the models of `input_required` and its retry, and the one
driver of the loop.

A modern server answers `tools/call` with `resultType: "input_required"` when it needs something of the
client: `inputRequests` (elicitations, roots, sampling, under keys it chose) and, with them or alone, an
opaque `requestState`. The client answers each request and calls again with `inputResponses` under the same
keys and the `requestState` byte for byte, until the result is `complete`.

`drive` is that loop and nothing else. It sends through a function it is given and gets a round's answers
from another, so it knows no connection, broker or deadline: `upstream/connection.py` gives it the wire, and
`upstream/mcp_call.py`'s `McpCallHooks` the answers (the broker's questions). Its rules:

- a round that asks counts towards `max_rounds`; one more is `TooManyRounds`;
- a round that carries only `requestState` (the server is still at it) is sent again after a pause that grows
  as the mcp SDK client's does (`Backoff`: 50 ms doubling to 250 ms) and is not counted: the call's own
  deadline bounds those, since the SDK server did not count on being asked eight times within milliseconds.

The surface is the other end of the same exchange: it answers its own modern client with an `InputRequired`
(`surface/driver.py`) and reads that client's retry as a `Retry`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from mcpx.mcp.protocol import Loose
from mcpx.shared.errors import McpxError

# a round that carries only requestState is sent again after a pause, 50 ms doubling to 250 ms
STATE_ONLY_FIRST_PAUSE = 0.05
STATE_ONLY_MAX_PAUSE = 0.25


class InputRequired(Loose):
    """A `tools/call` result that asks before it completes. `requestState` is the server's, opaque: kept as it
    came (any JSON value), and sent back only if it came (`carries_state`)."""

    result_type: Literal["input_required"] = Field(default="input_required", alias="resultType")
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")
    request_state: Any = Field(default=None, alias="requestState")

    @field_validator("input_requests", mode="before")
    @classmethod
    def _nothing_asked(cls, value: Any) -> Any:
        return value or None  # an empty one ([] or {}) asks nothing: the round carries only state

    @property
    def carries_state(self) -> bool:
        return "request_state" in self.model_fields_set

    def wire(self) -> dict[str, Any]:
        """The result as sent: resultType, inputRequests, requestState, in that order."""
        out: dict[str, Any] = {"resultType": "input_required"}
        if self.input_requests is not None:
            out["inputRequests"] = self.input_requests
        if self.carries_state:
            out["requestState"] = self.request_state
        return out


class Retry(Loose):
    """What a client's retry of a `tools/call` adds to its params: its answers, and the state it was handed."""

    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")
    request_state: Any = Field(default=None, alias="requestState")

    @field_validator("input_responses", mode="before")
    @classmethod
    def _none_given(cls, value: Any) -> Any:
        return value or {}  # absent, null or empty: nothing answered (asked again)


def retry_params(call: dict[str, Any], responses: dict[str, Any] | None, asked: InputRequired) -> dict[str, Any]:
    """The next round's tools/call params: the call's name and arguments, the answers (when the round asked), the
    requestState echoed byte for byte (when it carried one)."""
    params: dict[str, Any] = {"name": call["name"], "arguments": call["arguments"]}
    if responses is not None:
        params["inputResponses"] = responses
    if asked.carries_state:
        params["requestState"] = asked.request_state
    return params


class RoundsError(McpxError):
    """A modern call's rounds that cannot go on: the message names the server and what it did."""


class TooManyRounds(RoundsError):
    pass


@dataclass
class Backoff:
    """The pause before each state-only round: `first`, doubling up to `cap`; back to `first` once a round asks."""

    first: float = STATE_ONLY_FIRST_PAUSE
    cap: float = STATE_ONLY_MAX_PAUSE
    _next: float = 0.0

    def __post_init__(self) -> None:
        self._next = self.first

    def pause(self) -> float:
        pause, self._next = self._next, min(self._next * 2, self.cap)
        return pause

    def reset(self) -> None:
        self._next = self.first


Send = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Answer = Callable[[InputRequired, int], Awaitable[dict[str, Any]]]


async def drive(server: str, params: dict[str, Any], send: Send, answer: Answer, max_rounds: int, round_no: int = 0,
                sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> dict[str, Any]:
    """The call's complete result, or the task handle the server answered with instead (`resultType: "task"`, the
    Tasks extension: the rounds before it asked synchronously, the task asks on its own; mcp/tasks.py follows
    it). `params`: the first tools/call's (a re-driven call's retry, after a restart); `send`: one tools/call
    with those params, its result back; `answer`: a round's inputResponses, once every request in it is
    answered; `round_no`: the rounds that asked already (a re-driven call's)."""
    backoff: Backoff | None = None  # made when the first round carries only state: most calls never need one
    while True:
        res = await send(params)
        kind = res.get("resultType", "complete")
        if kind in ("complete", "task"):
            return res  # a task handle ends the rounds too: mcp/tasks.py follows it
        if kind != "input_required":
            raise RoundsError(f"server {server!r} answered tools/call with resultType {kind!r}, which mcpx does "
                              "not know")
        try:
            asked = InputRequired.model_validate(res)
        except ValueError:
            raise RoundsError(f"server {server!r} sent inputRequests that is not an object") from None
        if asked.input_requests:
            round_no += 1
            if round_no > max_rounds:
                raise TooManyRounds(f"server {server!r} kept asking for input: {max_rounds} rounds of "
                                    f"input_required on {params['name']} and still no result (elicit.maxRounds)")
            if backoff is not None:
                backoff.reset()
            params = retry_params(params, await answer(asked, round_no), asked)
        else:
            backoff = backoff or Backoff()
            await sleep(backoff.pause())
            params = retry_params(params, None, asked)
