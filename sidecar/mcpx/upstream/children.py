"""The server processes a daemon starts: recorded where whoever comes after finds them, and ended once their daemon
is gone, however it went (a `kill -9` of the daemon left two `npx` trees of ~130 MiB running with parent 1).

Each server process leads a session and process group of its own (mcp/stdio.py), so its group is what it started:
`npx` runs npm, npm runs `sh -c`, sh runs node. Three things end a dead daemon's servers, each where the one before
cannot:

- the kernel: each server process is started with a parent-death signal (SIGKILL, Linux's PR_SET_PDEATHSIG), so
  it dies with the daemon. That reaches the process the daemon started, not what that one started in turn;
- the daemon's watcher: a small process (groups.py, run as a script) the daemon starts before any server, holding the
  read end of a pipe whose write end only the daemon has. When the daemon is gone, by an exit or a kill, the
  pipe ends; the watcher ends the process group of every server in the daemon's record, removes the record, and
  exits. A daemon that stops cleanly has stopped its servers first, and the watcher finds nothing left to end;
- the next daemon: at its start it does the same for the record of every daemon that is gone (its watcher was
  killed too, say), before it starts any server of its own.

A record is a file per daemon, `children/PID.json` in the state directory: the daemon's pid and each server's, each
with its start time (/proc/PID/stat's 22nd field), so a pid the kernel has since given to another process is never
signalled. A group whose leader has exited is still recognised (the kernel gives no process a pid still in use as a
group's id): its members started after the leader are ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from mcpx.system.paths import StatePaths, write_private
from mcpx.upstream import groups

log = logging.getLogger("mcpx.upstream")

_PR_SET_PDEATHSIG = 1


def record_dir(paths: StatePaths) -> Path:
    return paths.root / "children"


def _daemon_gone(record: Path) -> bool:
    try:
        pid, started = json.loads(record.read_text())["daemon"]
        return groups.start_time(int(pid)) != int(started)
    except (OSError, ValueError, KeyError, TypeError):
        return True  # half a record: nobody writes it any more


def end_leftovers(paths: StatePaths) -> list[int]:
    """At a daemon's start: end what each gone daemon of this state directory left running; the pids signalled."""
    ended: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for record in sorted(record_dir(paths).glob("*.json")):
            if record.stem != str(os.getpid()) and _daemon_gone(record):
                found = groups.end_recorded(str(record))
                if found:
                    log.warning("ended %d process(es) a daemon before this one left running (pids %s)", len(found),
                                ", ".join(map(str, found)))
                ended += found
    return ended


def die_with_parent() -> Callable[[], None] | None:
    """A preexec function for a server's process: the kernel kills it when the daemon's thread that started it
    exits (the event loop's: the daemon's main thread). None where the kernel has no such signal (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the daemon died before the signal was set: nobody would send it
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class Children:
    """This daemon's record of its server processes, and the watcher that ends them if the daemon dies.

    `started` and `ended` are what mcp/stdio.py's ProcessChannel calls as a server's process starts and is gone."""

    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths
        self.record = record_dir(paths) / f"{os.getpid()}.json"
        self._own = (os.getpid(), groups.start_time(os.getpid()))
        self._children: dict[int, tuple[int, str]] = {}  # pid -> its start time, its server
        self._watcher: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None  # the write end: the watcher reads its end, until the daemon is gone
        self.preexec = die_with_parent()

    async def start(self) -> None:
        """End what gone daemons left, then start the watcher (before any server of this daemon's)."""
        await asyncio.to_thread(self._begin)

    def _begin(self) -> None:
        record_dir(self.paths).mkdir(mode=0o700, exist_ok=True)
        end_leftovers(self.paths)
        self._write()
        read_end, self._pipe = os.pipe()  # both close-on-exec: no server inherits the write end
        try:
            # its own session: a signal to the daemon's group (a terminal's ^C) leaves it to do its work
            # -S -E: no site, no PYTHON* variables; it imports nothing of mcpx (a few MiB, for as long as the daemon)
            self._watcher = subprocess.Popen(
                [sys.executable, "-S", "-E", groups.__file__, str(self.record)], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={}, start_new_session=True)
        finally:
            os.close(read_end)

    def started(self, pid: int, server: str) -> None:
        started = groups.start_time(pid)
        if started is not None:
            self._children[pid] = (started, server)
            self._write()

    def ended(self, pid: int) -> None:
        if self._children.pop(pid, None) is not None:
            self._write()

    def _write(self) -> None:
        write_private(self.record, json.dumps({
            "daemon": self._own, "children": {str(pid): entry for pid, entry in self._children.items()}}).encode())

    async def close(self) -> None:
        """After the servers were stopped: the watcher is let go (it ends anything still recorded) and waited for."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._watcher is not None:
            try:
                await asyncio.to_thread(self._watcher.wait, groups.GRACE + 5.0)
            except subprocess.TimeoutExpired:
                log.warning("the daemon's watcher (pid %d) has not finished ending what is left; it goes on alone",
                            self._watcher.pid)
