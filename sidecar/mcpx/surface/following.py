"""What the call driver keeps while it follows one call for one client (surface/driver.py, surface/plain_call.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mcpx.call.record import Call, FirstAsker, Watch

# the call's first asker for a client that can be asked mid-call, made from what the follower serves and watches
AskerFor = Callable[[dict[str, asyncio.Task[bool]], Watch], FirstAsker]


class Following:
    """The driver's watch on a call, the client's requests it serves (questions, slots), and for a client that can be
    asked mid-call the call's first asker (Call.ask_first), set up as it is made (a lean call's in the turn it is
    promoted, before the question that promoted it is asked)."""

    def __init__(self, call: Call, asker: AskerFor | None) -> None:
        self.call = call
        self.serving: dict[str, asyncio.Task[bool]] = {}  # what this client is being asked, by question or slot
        self.watch = call.watch()
        self.asks_first = asker is not None
        if asker is not None:  # it may be asked mid-call: a question it can answer is put to it before its commit
            call.first_asker(asker(self.serving, self.watch))

    def close(self) -> None:
        if self.asks_first:
            self.call.first_asker(None)
        self.watch.close()
        for t in self.serving.values():
            t.cancel()
