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
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

from mcpx.call.record import Call

log = logging.getLogger("mcpx.call")


class Sent(Protocol):
    """What a kind hands the lean path once a call's request is written."""

    def when_replied(self, heard: Callable[[], None]) -> None:
        """Call `heard` in the loop turn the upstream's reply is read (or the connection fails)."""
        ...

    @property
    def due(self) -> float:
        """Loop time the call's deadline runs out at, unless something pauses it (then it is promoted first)."""
        ...

    def plain(self) -> dict[str, Any] | None:
        """The call's result when the reply ends it plainly (what the call held is given back then); else None."""
        ...


# how a lean call left the lean path, told once (LeanCall): with its plain result, or None once promoted
Settled = Callable[[Call, dict[str, Any] | None], None]


class LeanCall:
    """A call on the lean path. `settled` hears once how it left it, with the call: its plain result once it ended
    there (the reply can go at once: its end is recorded right after, in the same turn, so nothing else sees it
    running), or None once it was promoted (a runner carries it on: follow it as any call), in the turn it happened,
    before anything else is told of it (a promoted call's first asker is set up there, before the question that
    promoted it is asked). `promote` promotes it (its caller's own end: withdrawn, gone)."""

    def __init__(self, call: Call, sent: Sent, promote: Callable[[], None], finish: Callable[[dict[str, Any]], None],
                 deadlines: Deadlines, settled: Settled) -> None:
        self.call = call
        self._sent = sent
        self._promote = promote
        self._finish = finish
        self._settled = settled
        self.settled = False
        self._due = deadlines.add(sent.due, self)  # its deadline: promoted then, the runner times it out
        call.lean(self.promote)
        sent.when_replied(self._replied)

    def _replied(self) -> None:
        if self.settled:
            return
        try:
            result = self._sent.plain()
        except Exception:  # a callback's error would reach no one, and leave the caller waiting: the runner says it
            log.exception("taking the reply of call %s on the lean path failed; it goes the full way", self.call.id)
            result = None
        if result is None:
            self.promote()
            return
        self._leave()
        self._settled(self.call, result)  # its reply first: the caller goes on while its end is recorded here
        self._finish(result)  # no event of a lean call's now: its end promotes nothing

    def promote(self) -> None:
        """Hand the call to a runner, which continues it from its request in flight (idempotent)."""
        if self.settled:
            return
        self._leave()
        self._promote()
        self._settled(self.call, None)

    def _leave(self) -> None:
        self.settled = True
        self._due[2] = None  # its deadline's entry no longer holds it (nor what it holds: the reply, the call)
        self.call.lean(None)


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
