"""The MCP surface on a client's own stdin and stdout, handed over by `mcpx serve` (mcpx/shared/handoff.py).

The host talks to the daemon itself: no process sits between them on a call. What `mcpx serve`
must know to carry on if this daemon goes away, it is told as Words, off every call's path: the
client's handshake (once), and a request only if it is still unanswered WAITING_AFTER after it
was read (then again once it is answered). A request the daemon had read and not answered when
it died is answered by serve with an error saying to send it again — if serve had been told of
it; one younger than WAITING_AFTER at a kill -9 is not (docs/internals.md says what is lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.outbound import PeerOutbound
from mcpx.mcp.stdio import Heard, PipeChannel
from mcpx.shared.handoff import WAITING_AFTER, HandoffMessage, Hello, encode_unread
from mcpx.surface.client_connection import ClientConnection, connection_state
from mcpx.surface.dispatch import Surface

log = logging.getLogger("mcpx.surface")

SendToServe = Callable[[HandoffMessage], None]
DRAIN_LIMIT = 60.0  # s: at the end of the client's input, what its last requests may still take to be answered


class WatchedPipe:
    """The client's pipes as a Channel, keeping count of its requests until each is answered (or withdrawn)."""

    def __init__(self, pipe: PipeChannel, say: SendToServe) -> None:
        self.pipe = pipe
        self.say = say
        self.open: dict[jsonrpc.Id, float] = {}  # requests read and not yet answered: when, oldest first
        self.named: set[jsonrpc.Id] = set()  # those of them serve was told of
        # set once none is open, made only for whoever waits for that (the end of input, a hand-back): not cleared
        # and set again on every request's way
        self._answered: asyncio.Event | None = None
        self.stopping = False
        self._ending: asyncio.Future[None] | None = None  # at the end of input: what was asked being answered
        self._loop = asyncio.get_running_loop()
        # one timer for all the requests read, due when the oldest not yet named will have waited WAITING_AFTER, not
        # one per request: nearly every request is answered long before, and its timer was set and cancelled for it
        self._naming: asyncio.TimerHandle | None = None

    async def receive(self) -> Message | None:
        msg = await self.pipe.receive()
        if msg is None:
            if not self.stopping:
                await self._drain()
            return None
        return self._seen(msg)

    def deliver_to(self, heard: Heard) -> None:
        """As the pipe's deliver_to: each message as it is read, counted first; None once what was asked is answered."""

        def seen(msg: Message | None) -> None:
            if msg is not None:
                heard(self._seen(msg))
            elif self.stopping:
                heard(None)
            else:
                self._ending = asyncio.ensure_future(self._drain())
                self._ending.add_done_callback(lambda _: heard(None))

        self.pipe.deliver_to(seen)

    def _seen(self, msg: Message) -> Message:
        method = msg.get("method")
        if method is None:
            return msg  # an answer to one of mcpx's own requests
        if "id" in msg:
            rid = msg["id"]
            self.open.pop(rid, None)  # an id used again counts from its new use
            self.open[rid] = self._loop.time()
            if self._naming is None:
                self._naming = self._loop.call_later(WAITING_AFTER, self._name_waiting)
            if method == "initialize":
                self.say(HandoffMessage(initialize=msg))
        elif method == "notifications/initialized":
            self.say(HandoffMessage(initialized=True))
        elif method == "notifications/cancelled":
            withdrawn = jsonrpc.id_of((msg.get("params") or {}).get("requestId"))
            if withdrawn is not None:
                self._settled(withdrawn)  # no answer is owed to a withdrawn request
        return msg

    async def _drain(self) -> None:
        """At the client's end of input, let what it asked be answered before the session ends: bounded, and not at
        all once nobody reads the answers (the host is gone). A tools/list right behind initialize waits for every
        upstream to start, which takes seconds on a loaded machine."""
        answered = asyncio.ensure_future(self.all_answered())
        gone = asyncio.ensure_future(self.pipe.output_gone.wait())
        try:
            await asyncio.wait({answered, gone}, timeout=DRAIN_LIMIT, return_when=asyncio.FIRST_COMPLETED)
        finally:
            answered.cancel()
            gone.cancel()

    async def send(self, msg: Message) -> None:
        await self.pipe.send(msg)
        self._sent(msg)

    def send_now(self, msg: Message) -> None:
        """As send, from a callback (a plain call's reply, surface/plain_call.py): in the pipe, or on its way in
        turn, when this returns."""
        if (going := self.pipe.send_now(msg)) is None:
            self._sent(msg)
        else:  # answered once it is in the pipe, as send has it
            going.add_done_callback(lambda _: self._sent(msg))

    def _sent(self, msg: Message) -> None:
        if "method" not in msg and (rid := jsonrpc.id_of(msg.get("id"))) is not None:
            self._settled(rid)

    async def all_answered(self) -> None:
        """Until every request read is answered (or withdrawn)."""
        if not self.open:
            return
        if self._answered is None:
            self._answered = asyncio.Event()
        await self._answered.wait()

    def _name_waiting(self) -> None:
        """Tell serve of every request that has waited WAITING_AFTER; be due again for the next that will have."""
        self._naming = None
        due = self._loop.time() - WAITING_AFTER + 0.001  # a timer may fire a hair before its time
        waiting = [rid for rid, read in self.open.items() if read <= due and rid not in self.named]
        if waiting:
            self.named.update(waiting)
            self.say(HandoffMessage(waiting=waiting))
        later = [read for rid, read in self.open.items() if rid not in self.named]
        if later:
            self._naming = self._loop.call_at(min(later) + WAITING_AFTER, self._name_waiting)

    def _settled(self, rid: jsonrpc.Id) -> None:
        if self.open.pop(rid, None) is not None:
            self._closed(rid)

    def _closed(self, rid: jsonrpc.Id) -> None:
        """Request `rid`, open until now, is answered: serve is told if it was told of it, a waiter if none is left."""
        if rid in self.named:
            self.named.discard(rid)
            # after the answer is in the pipe: a death between costs a duplicate
            self.say(HandoffMessage(answered=[rid]))
        if not self.open and self._answered is not None:
            self._answered.set()
            self._answered = None

    def unnamed(self) -> list[jsonrpc.Id]:
        return [rid for rid in self.open if rid not in self.named]

    async def close(self) -> None:
        if self._naming is not None:
            self._naming.cancel()
        if self._ending is not None:
            self._ending.cancel()
        await self.pipe.close()

    async def wait_exited(self) -> None:
        return None

    def describe_exit(self) -> str:
        return "the client closed its input"


class PipeSession:
    """One `mcpx serve`'s client, served on its stdin and stdout until its input ends or the daemon stops."""

    def __init__(self, surface: Surface, hello: Hello, pipe: PipeChannel, say: SendToServe) -> None:
        self.surface = surface
        self.hello = hello
        self.say = say
        state = connection_state(surface, scope=hello.server, session=hello.session, source="env", cwd=hello.cwd,
                                 tool_prefix=hello.tool_prefix, own_tools_only=hello.own_tools_only,
                                 unattended=hello.unattended)
        self.watch = WatchedPipe(pipe, say)
        self.conn = ClientConnection(surface, state, self.watch)

    async def serve(self) -> None:
        """Take on the handshake the client made with a daemon before this one, then serve until its input ends
        and what it asked is answered."""
        state, peer = self.conn.state, self.conn.peer
        if self.hello.initialize is not None:
            try:
                await self.surface.handle(state, self.hello.initialize, PeerOutbound(peer, None))
            except RpcError as exc:  # it was answered once already, by the daemon before; this one just learns it
                log.debug("the replayed initialize failed: %s", exc.message)
        if self.hello.initialized:
            await self.surface.on_notification(state, jsonrpc.notification("notifications/initialized"))
        await self.conn.serve()

    async def hand_back(self, serving: asyncio.Task[None], grace: float) -> None:
        """The daemon is stopping: read no more, give what runs `grace` seconds to be answered, then end the rest and
        tell serve which requests went unanswered and what was read of a line not finished."""
        self.watch.stopping = True
        self.watch.pipe.pause()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.watch.all_answered(), grace)
        unread = self.watch.pipe.take_unread()
        serving.cancel()
        await asyncio.wait({serving})  # ends the requests still running: the client is told of them by serve
        if unanswered := self.watch.unnamed():
            self.say(HandoffMessage(waiting=unanswered))
        if unread:
            self.say(HandoffMessage(unread=encode_unread(unread)))
