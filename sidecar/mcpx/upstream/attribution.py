"""Which call in flight a request of the server's belongs to, when the wire does not say.

A legacy instance may carry several calls at once. What the server asks mid-call names no call
on a stdio wire (the SDKs keep the request it relates to in their transport's metadata), so
`Attribution` works out whose it is: the call whose response stream carried it (Streamable HTTP),
the only call in flight, or the one left once the others have had their answers; never a guess.
The rule is pure: it is told of calls beginning and ending, and of requests asking; it needs
no process and no wire (tests/unit/upstream/test_attribution.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError
from mcpx.upstream.hooks import ServerToCall

log = logging.getLogger("mcpx.upstream")

# The longest a request of the server's is held while the calls beside it finish (see Attribution): then it is
# refused, and its tools run alone. Those calls are of tools seen to finish without asking, so they are quick as a
# rule; one that is not must not leave a question unopened, and its call hanging, for as long as it runs.
HOLD_LIMIT = 10.0


class InFlight:
    """A call on this instance now: who hears about it, and its progress token (the caller's, and mcpx's own
    on the wire: two callers may pick the same token, and an instance may carry both their calls).

    Its hooks are given, or (`made`) made the first time anything of the server's reaches the call: a plain call on
    the lean path (call/lean.py) has none made unless its server sends it something, which promotes it anyway."""

    __slots__ = ("_hooks", "_made", "asked", "progress", "tool", "wire_id", "wire_token")

    def __init__(self, hooks: ServerToCall | None, tool: str = "", *,
                 made: Callable[[], ServerToCall] | None = None) -> None:
        self._hooks = hooks
        self._made = made
        self.tool = tool
        self.progress: Any = None
        self.wire_token: str | None = None
        self.asked = False  # the server asked something of this call (or may have: one it could not be told from)
        self.wire_id: jsonrpc.Id | None = None  # its tools/call's id on the wire (legacy)

    @property
    def hooks(self) -> ServerToCall:
        if self._hooks is None:
            assert self._made is not None, "a call in flight has hooks, or how to make them"
            self._hooks, self._made = self._made(), None
        return self._hooks

    def numbered(self, wire_id: jsonrpc.Id) -> None:
        self.wire_id = wire_id


@dataclass(eq=False)
class HeldRequest:
    """A request of the server's that came while several calls were in flight: whose it is, once that is known."""

    suspects: list[InFlight]
    owner: asyncio.Future[InFlight | None]
    why: str = ""  # why it can never be told, once owner is None

    def settle(self, call: InFlight | None, why: str = "") -> None:
        if not self.owner.done():
            self.why = why
            self.owner.set_result(call)


class UnattributedRequest(RpcError):
    """A request of the server's whose call cannot be told: refused, naming the calls it may have come from."""

    def __init__(self, message: str, suspects: list[InFlight]) -> None:
        super().__init__(jsonrpc.INTERNAL_ERROR, message)
        self.suspects = suspects


class Attribution:
    """Which call a request of the server's belongs to, when the wire does not say.

    What it rests on is what the single-call rule always rested on: a server asks from inside the
    handler of the call it asks for, and waits for the answer before it answers that call (the
    SDKs' `ctx.elicit` does). So a request that comes while one call is in flight is that call's;
    one that comes while several are is held, and each of those calls that then gets its server's
    answer is ruled out; the last one left is the owner. A call that ends without its server's
    answer (cancelled, timed out) might have been the owner, and then nobody can tell: the request
    is refused, as it is when every suspect is waiting on a held request of its own, or when the
    suspects have not all finished within `limit` seconds.
    """

    def __init__(self, server: str, limit: float = HOLD_LIMIT) -> None:
        self.server = server
        self.limit = limit
        self.calls: list[InFlight] = []
        self.held: list[HeldRequest] = []

    def begin(self, call: InFlight) -> None:
        self.calls.append(call)

    def end(self, call: InFlight, answered: bool) -> None:
        """`call` left the wire: with its server's answer (it was waiting on no held request), or without one."""
        self.calls.remove(call)
        if not self.held:  # nothing the server asked waits to be told apart (nearly every call's end)
            return
        for held in [h for h in self.held if call in h.suspects]:
            if not answered:
                held.settle(None, f"the call to {call.tool or 'a tool'} ended without its server's answer while "
                                  "this request waited to be told apart, and it may have been that call's")
                continue
            held.suspects.remove(call)
            if len(held.suspects) == 1:
                held.settle(held.suspects[0])
            elif not held.suspects:
                held.settle(None, "every call in flight when it came has had its answer since")
        self._unstick()

    async def owner(self, method: str, related: jsonrpc.Id | None = None) -> InFlight | None:
        """The call the request in hand belongs to: the one it came related to (Streamable HTTP: on that call's
        response stream), else worked out; None with no call in flight; UnattributedRequest if it cannot be told."""
        for call in self.calls:
            if related is not None and call.wire_id == related:
                return call
        if len(self.calls) <= 1:
            return self.calls[0] if self.calls else None
        held = HeldRequest(list(self.calls), asyncio.get_running_loop().create_future())
        self.held.append(held)
        log.info("upstream %s sent %s while %d calls were in flight on one instance: held until it is known "
                 "whose it is", self.server, method, len(held.suspects))
        self._unstick()
        try:
            await asyncio.wait_for(asyncio.shield(held.owner), self.limit)
        except TimeoutError:
            held.settle(None, f"the calls it may be from did not all finish within {self.limit:g} s")
        finally:
            self.held.remove(held)
        owner = held.owner.result()
        if owner is None:
            tools = ", ".join(sorted({c.tool for c in held.suspects}))
            raise UnattributedRequest(
                f"mcpx cannot tell which of the calls in flight on this instance ({tools}) sent this {method}: "
                f"nothing on the wire says, and {held.why}; it runs these tools one call at a time from now on, so "
                "calling again works", held.suspects)
        return owner

    def _unstick(self) -> None:
        """Refuse the held requests once no suspect can end on its own: as many held as there are suspects."""
        waiting = [h for h in self.held if not h.owner.done()]
        suspects = {id(c) for h in waiting for c in h.suspects}
        if waiting and len(waiting) >= len(suspects):
            for held in waiting:
                held.settle(None, f"each of those {len(suspects)} calls may be waiting for a request like it")
