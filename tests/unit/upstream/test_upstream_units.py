"""Two rules of one upstream instance, held at the unit that keeps them (the peer on the wire replaced by a scripted
one; everything of the connection itself is real):

- what the instance says outside any call (resources/updated, list changes) reaches only the clients that
  forward through it, a resource's updates only those subscribed to it, and nobody once they left;
- a modern round that carries only requestState (the server is still at it) is retried after a growing pause and
  is not counted as a question round: twelve of them are no TooManyRounds, and they are not sent in a burst.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcpx.config.models import StdioServer
from mcpx.mcp.input_required import STATE_ONLY_FIRST_PAUSE, STATE_ONLY_MAX_PAUSE, InputRequired
from mcpx.mcp.jsonrpc import Message
from mcpx.upstream.connection import UpstreamConnection
from mcpx.upstream.handshake import ServerFacts
from mcpx.upstream.hooks import Events


async def _nothing() -> None:
    pass


def instance() -> UpstreamConnection:
    return UpstreamConnection("srv", StdioServer(command="srv"), "s",
                              events=Events(lambda tool, asks: None, lambda: None, _nothing))


async def test_an_instances_notifications_reach_only_whoever_listens_for_them() -> None:
    conn = instance()
    heard: dict[str, list[Message]] = {"alice": [], "bob": []}

    def relay(who: str) -> Any:
        async def hear(msg: Message) -> None:
            heard[who].append(msg)
        return hear

    conn.listen("alice", relay("alice"))
    conn.listen("bob", relay("bob"))
    conn.subscribed("alice", "file:///notes", True)
    conn.listen("bob", relay("bob"))  # a later forwarding by bob replaces nobody, and keeps bob's subscriptions

    updated = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///notes"}}
    await conn._on_notification(updated)
    assert heard == {"alice": [updated], "bob": []}

    changed = {"jsonrpc": "2.0", "method": "notifications/resources/list_changed", "params": {}}
    await conn._on_notification(changed)
    assert heard == {"alice": [updated, changed], "bob": [changed]}

    conn.subscribed("alice", "file:///notes", False)
    await conn._on_notification(updated)
    conn.subscribed("alice", "file:///notes", True)
    conn.unlisten("alice")  # alice's client went away
    await conn._on_notification(updated)
    await conn._on_notification(changed)
    assert heard == {"alice": [updated, changed], "bob": [changed, changed]}


class StillWorking:
    """A modern server that answers `busy` rounds with requestState alone, then completes; it notes when each
    round came."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.rounds: list[float] = []
        self.states: list[Any] = []

    async def request(self, method: str, params: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert method == "tools/call"
        self.rounds.append(asyncio.get_running_loop().time())
        self.states.append(params.get("requestState"))
        if len(self.rounds) <= self.busy:
            return {"resultType": "input_required", "requestState": f"round-{len(self.rounds)}"}
        return {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}


class NoQuestions:
    async def answer_round(self, asked: InputRequired, round_no: int) -> dict[str, Any]:
        raise AssertionError("no round asked anything")


async def test_rounds_that_carry_only_request_state_back_off_and_are_not_counted() -> None:
    conn = instance()
    conn.facts = ServerFacts(era="modern", version="2026-07-28")
    server = StillWorking(busy=12)
    conn.peer = server  # type: ignore[assignment]
    result = await asyncio.wait_for(conn._drive({"name": "build", "arguments": {}}, NoQuestions(),  # type: ignore[arg-type]
                                                max_rounds=8, meta=None, round_no=0), 30)
    assert result["content"][0]["text"] == "done"
    assert len(server.rounds) == 13
    assert server.states == [None] + [f"round-{i}" for i in range(1, 13)]  # each echoed byte for byte
    gaps = [b - a for a, b in zip(server.rounds, server.rounds[1:], strict=False)]
    # at least the pause each time (a loaded machine only makes them longer): 50, 100, 200, then 250 ms
    expected = [min(STATE_ONLY_FIRST_PAUSE * 2**i, STATE_ONLY_MAX_PAUSE) for i in range(12)]
    assert all(gap >= want * 0.9 for gap, want in zip(gaps, expected, strict=True)), gaps
