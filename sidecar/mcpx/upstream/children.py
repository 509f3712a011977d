"""The server processes a daemon starts: recorded where whoever comes after finds them, and ended once their daemon
is gone, however it went (a `kill -9` of the daemon left two `npx` trees of ~130 MiB running with parent 1).

Each server process leads a session and process group of its own (mcp/stdio.py), so its group is what it started:
`npx` runs npm, npm runs `sh -c`, sh runs node. Three things end a dead daemon's servers, each where the one before
cannot:

- the kernel: each server process is started with a parent-death signal (SIGKILL, Linux's PR_SET_PDEATHSIG), so
  it dies with the daemon. That reaches the process the daemon started, not what that one started in turn;
- the daemon's watcher: a small process (this module, run with -m) the daemon starts before any server, holding the
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
import time
from collections.abc import Callable
from pathlib import Path

from mcpx.paths import StatePaths, write_private

log = logging.getLogger("mcpx.upstream")

PROC = Path("/proc")
GRACE = 3.0  # how long a group has between SIGTERM and SIGKILL
_PR_SET_PDEATHSIG = 1
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # where `mcpx` is imported from, for the watcher


# ---- what /proc says of a process


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and ')'): state, ppid, pgrp, …"""
    try:
        return (PROC / str(pid) / "stat").read_text(errors="replace").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot; None when there is no such live process (a zombie has
    ended)."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _group(pgid: int, since: int) -> list[int]:
    """The live processes of process group `pgid` that started at `since` or later."""
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid and int(fields[19]) >= since:
            members.append(int(entry.name))
    return members


def end_group(pid: int, started: int, grace: float = GRACE) -> list[int]:
    """End the process group `pid` led when it started at `started`: SIGTERM, then SIGKILL to whatever is left after
    `grace`. Nothing is signalled when `pid` is now another process (its start time differs). The pids signalled."""
    now = start_time(pid)
    if now is not None and now != started:
        return []  # the pid was given to another process: not ours
    members = _group(pid, started)
    _signal(members, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (left := [m for m in members if start_time(m) is not None]) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal(left, signal.SIGKILL)
    return members


def _signal(pids: list[int], sig: int) -> None:
    for member in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, sig)


# ---- the records


def record_dir(paths: StatePaths) -> Path:
    return paths.root / "children"


def end_recorded(record: Path) -> list[int]:
    """End every server group in a gone daemon's record, then remove the record; the pids signalled."""
    try:
        data = json.loads(record.read_text())
        children = {int(pid): int(entry[0]) for pid, entry in data["children"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        children = {}
    ended = [member for pid, started in children.items() for member in end_group(pid, started)]
    with contextlib.suppress(FileNotFoundError):
        record.unlink()
    return ended


def _daemon_gone(record: Path) -> bool:
    try:
        pid, started = json.loads(record.read_text())["daemon"]
        return start_time(int(pid)) != int(started)
    except (OSError, ValueError, KeyError, TypeError):
        return True  # half a record: nobody writes it any more


def end_leftovers(paths: StatePaths) -> list[int]:
    """At a daemon's start: end what each gone daemon of this state directory left running; the pids signalled."""
    ended: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for record in sorted(record_dir(paths).glob("*.json")):
            if record.stem != str(os.getpid()) and _daemon_gone(record):
                found = end_recorded(record)
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
        self._own = (os.getpid(), start_time(os.getpid()))
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
            self._watcher = subprocess.Popen(
                [sys.executable, "-s", "-m", "mcpx.upstream.children", str(self.record)], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"PYTHONPATH": _PACKAGE_ROOT},
                start_new_session=True)
        finally:
            os.close(read_end)

    def started(self, pid: int, server: str) -> None:
        started = start_time(pid)
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
                await asyncio.to_thread(self._watcher.wait, GRACE + 5.0)
            except subprocess.TimeoutExpired:
                log.warning("the daemon's watcher (pid %d) did not finish; it is left to", self._watcher.pid)


def watch(record: Path) -> None:
    """The watcher: wait until the daemon is gone (its pipe, our stdin, ends), then end what its record holds."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            if not os.read(0, 512):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    end_recorded(record)


if __name__ == "__main__":
    watch(Path(sys.argv[1]))
