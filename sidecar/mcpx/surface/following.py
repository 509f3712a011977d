"""What the call driver keeps while it follows one call for one client (surface/driver.py, surface/plain_call.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from mcpx.call.record import Call, FirstAsker

log = logging.getLogger("mcpx.surface")

# the call's first asker for a client that can be asked mid-call, made from the following it serves
AskerFor = Callable[["Following"], FirstAsker]


class Following:
    """The driver's watch on a call, the client's requests it serves (questions, slots), and for a client that can be
    asked mid-call the call's first asker (Call.ask_first), set up as it is made (a lean call's in the turn it is
    promoted, before the question that promoted it is asked)."""

    def __init__(self, call: Call, asker: AskerFor | None) -> None:
        self.call = call
        # what this client is being asked, by question or slot: True once it needs asking no more (answered, here or
        # elsewhere), False if the client could not answer it (then it waits for other doors: `given_up`)
        self.serving: dict[str, asyncio.Future[bool]] = {}
        self.given_up: set[str] = set()  # the keys of `serving` that ended False (or in error)
        self.watch = call.watch()
        self.asks_first = asker is not None
        if asker is not None:  # it may be asked mid-call: a question it can answer is put to it before its commit
            call.first_asker(asker(self))

    def served(self, key: str, asking: asyncio.Future[bool]) -> None:
        """`asking` serves `key`: its end wakes the driver when the client could not answer (it leaves the question to
        other doors, and its early result is due at once); an answer wakes nobody (the question settles: the call's
        event)."""
        self.serving[key] = asking
        asking.add_done_callback(functools.partial(self._ended, key))

    def _ended(self, key: str, asking: asyncio.Future[bool]) -> None:
        if asking.cancelled():
            return  # withdrawn by the driver, or as it ends
        if (exc := asking.exception()) is not None:
            log.error("asking the client for %s failed", key, exc_info=exc)
        elif asking.result():
            return
        self.given_up.add(key)
        self.watch.poke()

    def close(self) -> None:
        if self.asks_first:
            self.call.first_asker(None)
        self.watch.close()
        for t in self.serving.values():
            t.cancel()
