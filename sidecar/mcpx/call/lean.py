"""A plain call's lean path: forwarded with only what it needs, and promoted to the full path on its first event.

A call whose server, tool and connection are ready (the tool known, nothing to confirm, no secret or login to ask
for, an instance to be had without waiting: upstream/gateway.py's `start_lean`) is written by its kind at once,
with no runner and no coroutine: from the turn its client's request was read (surface/plain_call.py), or from the
caller's own task (surface/driver.py). While nothing happens to it, its reply is taken as it comes
(a callback on the reply: a plain result ends the call, recorded as any call's end is). The moment anything does —
a question, a request for the client, progress, its deadline, a cancel (`Call.halt`), the client going away, a reply
that is not a plain result (an error, input_required, a task) — it is promoted: a runner takes the request in flight
on from there, through the same code a started call runs (the kind's `call` with what was sent), so what a call
promises (its audit, `mcpx task result`, timeouts, cancellation, restart recovery of modern calls, early results)
is the full path's.

What a lean call is made of: its ids and request, the kind's `SentCall` (the instance's lease, the request in flight)
and a heap entry for its deadline. Its `Call`, the scope a runner needs, the kind's hooks and deadline are made only
on promotion, or when something reads the call first (`LeanCall.call`: a door asking for it, `/v1/tasks`, a cancel;
the hooks, when its server sends it anything, which promotes it anyway); a call that ends plainly with none made is
recorded from its own fields (`LeanCall.stored_row`, the row its `Call` would give) and read back from them until
the store answers for it (`Calls.made`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from mcpx.broker.store import TaskRow
from mcpx.call.record import Call, task_row
from mcpx.call.request import CallRequest

log = logging.getLogger("mcpx.call")


class SentCall(Protocol):
    """What a kind hands the lean path once a call's request is written."""

    @property
    def era(self) -> str | None:
        """The era of the connection the request went on (the call's, once it has a `Call`)."""
        ...

    @property
    def due(self) -> float:
        """Loop time the call's deadline runs out at, unless something pauses it (then it is promoted first)."""
        ...

    def when_replied(self, heard: Callable[[], None]) -> None:
        """Call `heard` in the loop turn the upstream's reply is read (or the connection fails)."""
        ...

    def plain(self) -> dict[str, Any] | None:
        """The call's result when the reply ends it plainly (what the call held is given back then); else None."""
        ...

    def taken_on(self, call: Call) -> Awaitable[dict[str, Any]]:
        """The runner's work once the call is promoted: the call continued from its request in flight."""
        ...


class CallKeeper(Protocol):
    """Who keeps the daemon's calls (call/lifecycle.py's Calls), as a lean call needs them."""

    def made(self, lean: LeanCall) -> Call:
        """The lean call's `Call`, made now and kept as any call's is (it is read, or something happened to it)."""
        ...

    def promoted(self, lean: LeanCall, call: Call) -> None:
        """A runner carries the call on from its request in flight."""
        ...

    def ended(self, lean: LeanCall, result: dict[str, Any]) -> None:
        """The call ended on the lean path: its end recorded as any call's is."""
        ...

    async def save(self, call: Call) -> None: ...


# how a lean call left the lean path, told once (LeanCall): with its plain result, or None once promoted
Settled = Callable[["LeanCall", dict[str, Any] | None], None]


class LeanCall:
    """A call on the lean path, with nothing made for it but what its request and reply need: its ids, its request,
    the kind's `SentCall` and a deadline's heap entry. Its `Call` (and the kind's hooks and deadline, which need one) is
    made only when something reads it (`call`: a door, `/v1/tasks`, a cancel) or happens to it (it is promoted); a
    call that ends plainly with none made has its end recorded from these fields alone (`stored_row`), the same row
    and task.done a `Call` gives.

    `settled` hears once how it left the lean path: its plain result once it ended there (the reply can go at once:
    its end is recorded right after, in the same turn, so nothing else sees it running), or None once it was
    promoted (a runner carries it on: follow `call` as any call), in the turn it happened, before anything else is
    told of it (a promoted call's first asker is set up there, before the question that promoted it is asked).
    `promote` promotes it (its caller's own end: withdrawn, gone). A plain call hands its server no credential (the
    lean path takes no server with secrets or a login: upstream/gateway.py's `start_lean`), so nothing it keeps or
    shows needs scrubbing."""

    __slots__ = ("_call", "_due", "_keeper", "_sent", "_settled", "created", "ended_at", "era", "id", "request",
                 "result", "settled", "trace")

    def __init__(self, keeper: CallKeeper, tid: str, trace: str, request: CallRequest) -> None:
        self._keeper = keeper
        self.id = tid
        self.trace = trace
        self.request = request
        self.created = time.time()
        self._call: Call | None = None
        self._sent: SentCall | None = None
        self._settled: Settled | None = None
        self._due: Due | None = None
        self.settled = False
        self.era: str | None = None  # its connection's, once sent
        self.result: dict[str, Any] | None = None  # once it ended on the lean path
        self.ended_at = 0.0

    def sent(self, sent: SentCall, deadlines: Deadlines, settled: Settled) -> None:
        """Its request is written (`sent`): from here its reply is taken as it comes, and its deadline runs."""
        self._sent = sent
        self.era = sent.era
        self._settled = settled
        self._due = deadlines.add(sent.due, self)  # its deadline: promoted then, the runner times it out
        sent.when_replied(self._replied)

    @property
    def made(self) -> bool:
        """Its `Call` was made (it ends as that call then)."""
        return self._call is not None

    @property
    def call(self) -> Call:
        """The call as every door knows it, made now if it was not before (kept by the keeper from then on)."""
        if self._call is None:
            self._call = self._keeper.made(self)
            if not self.settled:
                self._call.lean(self.promote)  # an event of the call's promotes it
        return self._call

    async def save(self) -> None:
        """The call as it stands, stored now (the kind's hooks save through this: they have its `Call`)."""
        await self._keeper.save(self.call)

    def _replied(self) -> None:
        if self.settled:
            return
        assert self._sent is not None
        try:
            result = self._sent.plain()
        except Exception:  # a callback's error would reach no one, and leave the caller waiting: the runner says it
            log.exception("taking the reply of call %s on the lean path failed; it goes the full way", self.id)
            result = None
        if result is None:
            self.promote()
            return
        self._leave()
        # over on its connection: the request in flight is let go, which held this call (the kind's `SentCall` holds
        # its `LeanCall`), so that none of what it made is left in a cycle for the collector to find
        self._sent = None
        self.result, self.ended_at = result, time.time()
        self._told()(self, result)  # its reply first: the caller goes on while its end is recorded here
        self._keeper.ended(self, result)  # no event of a lean call's now: its end promotes nothing

    def promote(self) -> None:
        """Hand the call to a runner, which continues it from its request in flight (idempotent)."""
        if self.settled:
            return
        call = self.call
        self._leave()
        self._keeper.promoted(self, call)
        self._told()(self, None)

    def _told(self) -> Settled:
        """Who hears how it left the lean path, let go as they are told (once): they hold this call (a plain call's
        `PlainCall` holds its `LeanCall`), and a cycle left behind each call is the collector's work."""
        settled, self._settled = self._settled, None
        assert settled is not None
        return settled

    def taken_on(self, call: Call) -> Awaitable[dict[str, Any]]:
        """What its runner runs once promoted (the kind's, from the request in flight)."""
        assert self._sent is not None
        return self._sent.taken_on(call)

    def _leave(self) -> None:
        self.settled = True
        if self._due is not None:
            self._due[2] = None  # its deadline's entry no longer holds it (nor what it holds: the reply, the call)
        if self._call is not None:
            self._call.lean(None)

    def stored_row(self) -> TaskRow:
        """The row of the call, ended plainly, without its `Call` (built on the store's thread: a lean call that
        ended changes no more): `Call.stored_row`'s of the same call (tests/unit/call/test_call_end.py)."""
        return task_row(self.id, self.trace, self.request, "completed", self.era, self.created, self.ended_at,
                        self.result, None)


Due = list[Any]  # [when, order, the LeanCall or None once it settled]: a heap entry of Deadlines


class Deadlines:
    """The deadlines of the calls on the lean path, on one timer: a call that ends lean (nearly all do, long before
    their timeout) costs a heap entry, not a timer of its own set and cancelled (in uvloop a libuv timer each)."""

    def __init__(self) -> None:
        self._heap: list[Due] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._armed = math.inf  # when the timer fires

    def add(self, when: float, lean: LeanCall) -> Due:
        """`lean` is promoted at `when` (loop time) unless it settled before; its entry, emptied once it does."""
        heap = self._heap
        while heap and heap[0][2] is None:  # calls end about in the order they began: the ended leave here
            heapq.heappop(heap)
        due: Due = [when, next(self._order), lean]
        heapq.heappush(heap, due)
        if when < self._armed:
            self._arm(when)
        return due

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed = when
        self._timer = asyncio.get_running_loop().call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer, self._armed = None, math.inf
        heap = self._heap
        now = asyncio.get_running_loop().time()
        while heap and (heap[0][2] is None or heap[0][0] <= now):
            lean = heapq.heappop(heap)[2]
            if lean is not None:
                lean.promote()
        if heap:
            self._arm(heap[0][0])
