"""A legacy client's plain call taken in the loop turn its request is read, with no task and no coroutine.

On a channel that writes from a callback (the pipes `mcpx serve` hands over: mcp/stdio.py's `send_now`), the client's
`tools/call` of a tool named already (surface/dispatch.py's `take_now`) is not handed to a task of its own: the call
is written upstream in that same turn (`CallDriver.take_now`, the lean path of call/lean.py), and when the upstream's
reply ends it plainly, its result is written to the client from the reply's own turn (`Peer.reply_now`). In between
the daemon holds a `LeanCall` (its `Call` made only if something reads it or happens to it) and this, and no future
anyone awaits.

The moment the call leaves the lean path it is followed as any call is: promoted (a question, a request for the
client, progress, its deadline, a cancel from another door, a reply that is not a plain result), a task carries the
client's request on from there (`Peer.take_on`: `CallDriver.follow`, replied to as any request); withdrawn by the
client (notifications/cancelled), the call is cancelled; its client gone, it goes on in the daemon. Both as
`CallDriver.follow` has them, whichever comes first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from inspect import CORO_CREATED, getcoroutinestate
from typing import Any, Protocol

from mcpx.call.lean import LeanCall
from mcpx.call.record import Call
from mcpx.mcp.jsonrpc import Message
from mcpx.mcp.outbound import Outbound, PeerOutbound
from mcpx.surface.client_state import ClientState
from mcpx.surface.following import Following
from mcpx.surface.results import completed_result


class Follower(Protocol):
    """What a taken call needs of whoever follows calls for its client (surface/driver.py's CallDriver)."""

    def following(self, call: Call, state: ClientState, out: Outbound) -> Following: ...

    async def follow(self, task: Call, following: Following, state: ClientState, out: Outbound, bound: str,
                     token: Any, late: list[str]) -> dict[str, Any]: ...

    def left(self, task: Call, withdrawn: bool) -> None: ...


class PlainCall:
    """One client request taken in its turn (mcp/peer.py's `Taken`), from its plain call written upstream until its
    reply is written back, or until whoever carries it on from its promotion ends."""

    def __init__(self, driver: Follower, state: ClientState, out: PeerOutbound, msg: Message, token: Any) -> None:
        self.driver, self.state, self.out, self.msg, self.token = driver, state, out, msg, token
        self.lean: LeanCall | None = None  # once sent (CallDriver.take_now)
        self._carrying: asyncio.Task[None] | None = None  # the task that follows it once promoted
        self._work: Coroutine[Any, Any, dict[str, Any]] | None = None  # what that task runs
        self._following: Following | None = None
        self._left = False  # the client withdrew it or went before it was promoted: nobody follows it

    # ---- how it leaves the lean path (LeanCall's `settled`)

    def settled(self, lean: LeanCall, result: dict[str, Any] | None) -> None:
        if result is not None:  # the reply goes first; the call's end is recorded after it, in this same turn
            reply = completed_result(result)  # nothing of a plain call's to scrub (call/lean.py)
            reply.pop("resultType", None)  # a legacy client's result, as Surface.handle has it
            self.out.peer.reply_now(self.msg["id"], reply)
            return
        if self._left:
            return
        call = lean.call
        self._following = following = self.driver.following(call, self.state, self.out)
        self._work = self.driver.follow(call, following, self.state, self.out, "", self.token, [])
        self._carrying = self.out.peer.take_on(self.msg, self._work)

    # ---- the client's side (mcp/peer.py's `Taken`)

    def withdraw(self) -> None:
        self._leave()

    def abandon(self) -> None:
        self._leave()

    def _leave(self) -> None:
        """The client withdrew the request or went: the call's event. Followed already, its follower hears it as a
        cancel (`CallDriver.follow`); else it is said here as the follower would have said it."""
        carrying, lean = self._carrying, self.lean
        assert lean is not None  # taken only once sent (CallDriver.take_now)
        # a cancel before the task's first step would skip its whole body (`follow`, which says it): begun, it is
        # its follower's to say; not yet, it is said here
        if carrying is not None and self._work is not None and getcoroutinestate(self._work) != CORO_CREATED:
            carrying.cancel()
            return
        withdrawn = self.out.withdrawn()
        if carrying is not None:
            carrying.cancel()  # it never began: its body, which would have said it, never runs
            assert self._following is not None and self._work is not None
            self._work.close()
            self._following.close()
        else:
            self._left = True
            lean.promote()  # a runner carries the call on; nobody follows it here
        self.out.peer.settle(self.msg["id"])
        self.driver.left(lean.call, withdrawn)
