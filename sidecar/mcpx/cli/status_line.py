"""One line on a terminal's stderr that says what mcpx waits for, rewritten in place while it waits and wiped when
it is done: a call whose server is working (its own progress, when it reports any), a listing that starts servers.
Nothing at all when stderr is not a terminal: a script's output stays clean."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, TypeVar

from mcpx.presentation.text import plain

T = TypeVar("T")


class StatusLine:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.on = self.out.isatty()
        self.shown = False
        self.started = time.monotonic()

    def show(self, text: str) -> None:
        if not self.on:
            return
        elapsed = time.monotonic() - self.started
        self.out.write(f"\r\x1b[K{plain(text, 150)} · {elapsed:.0f} s")
        self.out.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.shown = False


async def while_waiting(work: Awaitable[T], say: Callable[[], str], every: float = 0.5,
                        line: StatusLine | None = None) -> T:
    """`work`'s result; while it runs (past a first moment), `say()` on the status line, every `every` seconds."""
    line = line or StatusLine()
    task: asyncio.Future[T] = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            line.show(say())
    finally:
        line.clear()
        if not task.done():
            task.cancel()


def progress_text(doc: dict[str, Any]) -> str:
    """A call's status in a few words: the tool, and the server's own progress when it reported any."""
    head = f"{doc.get('server')}.{doc.get('tool')}"
    p = doc.get("progress") or {}
    if not p:
        return f"waiting for {head}"
    amount = p.get("progress")
    total = p.get("total")
    share = f"{amount:g}/{total:g}" if isinstance(amount, int | float) and isinstance(total, int | float) else \
        (f"{amount:g}" if isinstance(amount, int | float) else "")
    message = p.get("message") or ""
    return f"{head}: " + " — ".join(x for x in (share, message) if x)
