"""A request's reply heard in the loop turn it is read (`Sent.when_replied`: a plain call's lean path takes its
reply so), on two real peers over a socket pair: before any callback on the reply's future, and also when the
other side goes away instead of answering."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest

from mcpx.mcp.jsonrpc import Message
from mcpx.mcp.peer import Peer, PeerClosed
from mcpx.mcp.stdio import PipeChannel

PATIENCE = 10.0  # bounds the waits; each ends with an event


async def _pair(answer: asyncio.Event) -> tuple[Peer, Peer]:
    # one socket pair each way, as a server process's stdin and stdout are (a write pipe's transport reads its own
    # end to learn that the other went)
    to_server, from_caller = (end.detach() for end in socket.socketpair())
    to_caller, from_server = (end.detach() for end in socket.socketpair())
    left = await PipeChannel.open(to_caller, to_server, "left")
    right = await PipeChannel.open(from_caller, from_server, "right")

    async def on_request(msg: Message) -> dict[str, Any]:
        await answer.wait()
        return {"echo": msg["params"]}

    caller, server = Peer(left, name="caller"), Peer(right, on_request, name="server")
    caller.start()
    server.start()
    return caller, server


async def test_a_reply_is_heard_in_the_turn_it_is_read_before_its_futures_callbacks() -> None:
    answer = asyncio.Event()
    caller, server = await _pair(answer)
    try:
        sent = await caller.send_request("echo", {"n": 1})
        order: list[str] = []
        heard = asyncio.get_running_loop().create_future()
        sent.future.add_done_callback(lambda _f: order.append("callback"))

        def hear() -> None:
            order.append("heard")
            heard.set_result(sent.future.done())

        sent.when_replied(hear)
        answer.set()
        assert await asyncio.wait_for(heard, PATIENCE) is True  # the reply is there when it is heard
        assert order == ["heard", "callback"]  # in the turn it was read: the future's own callbacks run a turn later
        assert sent.result() == {"echo": {"n": 1}}
        late = asyncio.get_running_loop().create_future()
        sent.when_replied(lambda: late.set_result(True))  # one that asks once the reply came hears it soon
        assert await asyncio.wait_for(late, PATIENCE)
    finally:
        await caller.close()
        await server.close()


async def test_a_reply_that_never_comes_is_heard_when_the_other_side_goes() -> None:
    caller, server = await _pair(asyncio.Event())  # the server never answers
    try:
        sent = await caller.send_request("echo", {"n": 2})
        heard = asyncio.get_running_loop().create_future()
        sent.when_replied(lambda: heard.set_result(sent.future.exception()))
        await server.close()
        assert isinstance(await asyncio.wait_for(heard, PATIENCE), PeerClosed)
    finally:
        await caller.close()



async def test_a_reply_written_early_is_the_one_reply_and_none_goes_to_a_withdrawn_request(
        caplog: pytest.LogCaptureFixture) -> None:
    """`Peer.reply_early` (a question's answer handed to its server before its record is built): the caller has the
    early reply while the handler still runs, and the handler's own result is not written after it; a request the
    caller withdrew, or one no longer being handled, gets nothing early."""
    to_server, from_caller = (end.detach() for end in socket.socketpair())
    to_caller, from_server = (end.detach() for end in socket.socketpair())
    left = await PipeChannel.open(to_caller, to_server, "left")
    right = await PipeChannel.open(from_caller, from_server, "right")
    go_on = asyncio.Event()
    handling: asyncio.Queue[Any] = asyncio.Queue()
    cancelled: asyncio.Queue[Any] = asyncio.Queue()

    async def on_request(msg: Message) -> dict[str, Any]:
        handling.put_nowait(msg["id"])
        try:
            await go_on.wait()
        except asyncio.CancelledError:
            cancelled.put_nowait(msg["id"])
            raise
        return {"echo": msg["params"]}

    caller, server = Peer(left, name="caller"), Peer(right, on_request, name="server")
    caller.start()
    server.start()
    caplog.set_level(logging.DEBUG, logger="mcpx.mcp")
    try:
        sent = await caller.send_request("echo", {"n": 3})
        rid = await asyncio.wait_for(handling.get(), PATIENCE)
        assert server.reply_early(rid, {"early": True})
        assert not server.reply_early(rid, {"early": "twice"})  # one reply a request
        assert await asyncio.wait_for(sent.reply(), PATIENCE) == {"early": True}  # while its handler still waits
        go_on.set()  # its handler returns; the reply to the next request comes after where its result would be
        assert await asyncio.wait_for(caller.request("echo", {"n": 4}), PATIENCE) == {"echo": {"n": 4}}
        assert not [r for r in caplog.records if "unknown id" in r.getMessage()]  # no second reply came
        handling.get_nowait()  # the one after it, handled
        assert not server.reply_early(rid, {"late": True})  # no longer being handled
        go_on.clear()
        withdrawn = await caller.send_request("echo", {"n": 5})
        wid = await asyncio.wait_for(handling.get(), PATIENCE)
        await caller.notify("notifications/cancelled", {"requestId": withdrawn.rid})
        assert await asyncio.wait_for(cancelled.get(), PATIENCE) == wid
        assert not server.reply_early(wid, {"early": True})
        withdrawn.future.add_done_callback(lambda f: f.exception())  # it ends unanswered as the caller closes
    finally:
        await caller.close()
        await server.close()
