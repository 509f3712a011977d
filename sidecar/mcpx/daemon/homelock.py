"""One daemon per state directory: it holds daemon.lock (flock) from before it opens mcpx.db until it exits.

Two daemons started at once for one home both find no socket answering; only one of them gets
the lock. The kernel lets go of it when the process ends, however it ends (kill -9 included),
so a lock is never stale. The file stays; only the lock on it comes and goes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

from mcpx.shared.errors import McpxError
from mcpx.system.paths import StatePaths


class HomeTaken(McpxError):
    """Another daemon holds this state directory."""


def _holder(fd: int, within: float = 0.5) -> str:
    """The pid the holder wrote. It writes it just after it got the lock, so a daemon started at the same moment
    may look before it is there: look again, for a bounded while (the daemon refused exits; nothing waits on it)."""
    give_up = time.monotonic() + within
    while True:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if holder.isdigit() or time.monotonic() >= give_up:
            return holder
        time.sleep(0.01)


@contextlib.contextmanager
def hold_home(paths: StatePaths) -> Iterator[None]:
    """Hold `paths`' lock while the block runs; HomeTaken, naming the holder's pid, if another process holds it."""
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            raise HomeTaken(f"a daemon is already running for {paths.root}"
                            + (f" (pid {holder})" if holder.isdigit() else "")) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)  # who holds it, for the one refused
        yield
    finally:
        os.close(fd)  # closing the descriptor lets go of the lock
