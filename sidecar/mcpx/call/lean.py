"""A plain call's lean path: forwarded with only what it needs, and promoted to the full path on its first event.

A call whose server, tool and connection are ready (the tool known, nothing to confirm, no secret or login to ask
for, an instance to be had without waiting: upstream/gateway.py's `start_lean`) is sent by its kind from the
caller's own task (surface/driver.py), with no runner. While nothing happens to it, its reply is taken as it comes
(a callback on the reply: a plain result ends the call, recorded as any call's end is). The moment anything does —
a question, a request for the client, progress, its deadline, a cancel (`Call.halt`), the client going away, a reply
that is not a plain result (an error, input_required, a task) — it is promoted: a runner takes the request in flight
on from there, through the same code a started call runs (the kind's `call` with what was sent), so what a call
promises (its audit, `mcpx task result`, timeouts, cancellation, restart recovery of modern calls, early results)
is the full path's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from mcpx.call.record import Call

log = logging.getLogger("mcpx.call")


class Sent(Protocol):
    """What a kind hands the lean path once a call's request is written."""

    @property
    def reply(self) -> asyncio.Future[Any]:
        """Set when the upstream's reply comes (or the connection fails)."""
        ...

    @property
    def due(self) -> float:
        """Loop time the call's deadline runs out at, unless something pauses it (then it is promoted first)."""
        ...

    def plain(self) -> dict[str, Any] | None:
        """The call's result when the reply ends it plainly (what the call held is given back then); else None."""
        ...


class LeanCall:
    """A call on the lean path: `outcome` is True once it ended there (`call.result` is its result), False once it
    was promoted (a runner carries it on: follow it as any call). `promote` promotes it (the driver's own end)."""

    def __init__(self, call: Call, sent: Sent, promote: Callable[[], None],
                 finish: Callable[[dict[str, Any]], None]) -> None:
        loop = asyncio.get_running_loop()
        self.call = call
        self.outcome: asyncio.Future[bool] = loop.create_future()
        self._sent = sent
        self._promote = promote
        self._finish = finish
        self._settled = False
        self._timer = loop.call_at(sent.due, self.promote)  # its deadline: promoted, the runner times it out
        call.lean(self.promote)
        sent.reply.add_done_callback(self._replied)

    def _replied(self, _reply: asyncio.Future[Any]) -> None:
        if self._settled:
            return
        try:
            result = self._sent.plain()
        except Exception:  # a callback's error would reach no one, and leave the driver waiting: the runner says it
            log.exception("taking the reply of call %s on the lean path failed; it goes the full way", self.call.id)
            result = None
        if result is None:
            self.promote()
            return
        self._settle(True)
        self._finish(result)

    def promote(self) -> None:
        """Hand the call to a runner, which continues it from its request in flight (idempotent)."""
        if self._settled:
            return
        self._settle(False)
        self._promote()

    def _settle(self, ended: bool) -> None:
        self._settled = True
        self._timer.cancel()
        self.call.lean(None)
        if not self.outcome.done():
            self.outcome.set_result(ended)
