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
import logging
from collections.abc import Coroutine
from inspect import CORO_CREATED, getcoroutinestate
from typing import Any, Protocol

from mcpx.call.lean import LeanCall
from mcpx.call.record import Call
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.outbound import Outbound, PeerOutbound
from mcpx.surface.client_state import ClientState
from mcpx.surface.following import Following
from mcpx.surface.results import completed_result, task_result, with_notes

log = logging.getLogger("mcpx.surface")


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
        self._over = False  # promoted and followed by its events (`_moved`): replied to, withdrawn or gone

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
        if self.token is None and following.asks_first:
            # followed by the call's events, heard in their steps (`_moved`), while nothing happens that its follower
            # would act on but the client's questions asked first and their answers: a task follows it from the
            # first that does, and none at all when the call ends so (nearly every question's round trip)
            following.watch.hear(self._moved)
            return
        self._carry(call, following)

    def _carry(self, call: Call, following: Following) -> None:
        """A task follows the call from here, as any call is followed (CallDriver.follow), replied to as any request."""
        following.watch.hear(None)
        self._work = self.driver.follow(call, following, self.state, self.out, "", self.token, [])
        self._carrying = self.out.peer.take_on(self.msg, self._work)

    def _moved(self) -> None:
        """An event of the promoted call's, in its own step: its end is replied to here; a question this client was
        not asked first (or could not answer), a request for it, a question passed over or a dialog to withdraw is
        its follower's to act on, in a task from now on (`_carry`). Its progress, its questions settling once their
        dialogs are over, move nothing (and its heartbeats are only for a client that gave a progress token)."""
        following = self._following
        if following is None or self._carrying is not None or self._over:
            return
        call = following.call
        try:
            if call.done:
                self._end(call, following)
                return
            if not self._quiet(call, following):
                self._carry(call, following)
        except Exception:  # a bug of this shortcut's: the task takes the call on, as it would have from the start
            log.exception("following call %s from its events failed; a task follows it", call.id)
            if not self._over and self._carrying is None:
                self._carry(call, following)

    @staticmethod
    def _quiet(call: Call, following: Following) -> bool:
        """Nothing for a follower to act on: every open question is one this client is being asked (or was, and
        answered), none passed over, no request for the client, no dialog left over a question no longer open."""
        if following.given_up or call.slots:
            return False
        open_, serving = call.open, following.serving
        for eid in open_:
            if eid not in serving:
                return False
        if open_ and call.passed_over:
            return False
        for key, asking in serving.items():  # noqa: SIM110 (a loop: no generator's frame, on every event)
            if key not in open_ and not asking.done():
                return False
        return True

    def _end(self, call: Call, following: Following) -> None:
        """The call ended: its result written back now, as its follower would have returned it (CallDriver.follow)."""
        try:
            reply = with_notes(task_result(call), [])
        except RpcError as exc:  # the server's own protocol error, passed through (as _answer replies it)
            self._over = True
            following.close()
            self.out.peer.reply_error_now(self.msg["id"], exc)
            return
        self._over = True
        following.close()
        self.out.peer.reply_now(self.msg["id"], reply)

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
        elif self._following is not None:  # followed by its events: as its follower's cancel would have said it
            if self._over:
                return  # replied to already
            self._over = True
            self._following.close()
        else:
            self._left = True
            lean.promote()  # a runner carries the call on; nobody follows it here
        self.out.peer.settle(self.msg["id"])
        self.driver.left(lean.call, withdrawn)
