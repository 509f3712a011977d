"""The store's own threads: what crosses off the loop to a store's connection (a batch to commit, a read) runs there."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")


class StoreThread:
    """A thread of the store's own, running what it is handed one at a time in turn, each outcome set on the asking
    loop's future. What a one-worker ThreadPoolExecutor and `run_in_executor` did, without the concurrent future, its
    condition and the asyncio future wrapped around it per item: a hand-off cost ~120,000 instructions there and
    ~18,000 so (both threads, under callgrind), and a stream of plain calls hands the store's thread one commit of
    their ends every few calls (bench/call_cost.py --instructions).

    Each store has two, its writer's and its reader's (broker/sqlite.py, broker/postgres.py). A daemon thread,
    started with the first item: a process that exits without closing the store (its loop ended by an error) is not
    held up by it; what it was committing then is lost as a kill -9 would lose it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._items: SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any],
                                       tuple[Any, ...]] | None] = SimpleQueue()
        self._thread: threading.Thread | None = None

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`fn(*args)` on the thread, after what was handed to it before."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self._thread.start()
        self._items.put((loop, fut, fn, args))
        return fut

    def shutdown(self) -> None:
        """The thread ends once what was handed to it ran (at once when idle)."""
        self._items.put(None)

    def _serve(self) -> None:
        while (item := self._items.get()) is not None:
            self._run_item(*item)

    @staticmethod
    def _run_item(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], fn: Callable[..., Any],
                  args: tuple[Any, ...]) -> None:
        try:
            value = fn(*args)
        except BaseException as exc:  # the caller's to see, as a worker of ThreadPoolExecutor hands it on
            outcome: tuple[Any, BaseException | None] = (None, exc)
        else:
            outcome = (value, None)
        with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: nobody is left to hear it
            loop.call_soon_threadsafe(_settle, fut, *outcome)


def _settle(fut: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if fut.cancelled():
        return
    if exc is None:
        fut.set_result(value)
    else:
        fut.set_exception(exc)
