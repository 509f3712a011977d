"""One line on a terminal's stderr that says what mcpx waits for, rewritten in place while it waits and wiped when
it is done: a call whose server is working (its own progress, when it reports any), a listing that starts servers.
Nothing at all when stderr is not a terminal: a script's output stays clean."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, TextIO

from mcpx.presentation.text import plain

if TYPE_CHECKING:
    from mcpx.client.replies import TaskView


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


def while_waiting(work: Sequence[Future[Any]], say: Callable[[], str], every: float = 0.5,
                  line: StatusLine | None = None) -> None:
    """Until every one of `work` is done (each one's exception raised then); while they run (past a first moment),
    `say()` on the status line, every `every` seconds. Futures of threads, not of an event loop: a command that
    waits on blocking requests starts without asyncio."""
    line = line or StatusLine()
    try:
        while True:
            _, running = wait(work, timeout=every)
            if not running:
                break
            line.show(say())
    finally:
        line.clear()
        for future in work:
            future.cancel()
    for future in work:
        future.result()


def progress_text(doc: TaskView) -> str:
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
