"""Ending a dead daemon's server process groups (children.py), with nothing but the standard library: the
daemon's watcher runs this file as a script (`python -S -E groups.py RECORD`), and a watcher lives as long as its
daemon, so it imports as little as it can (about 10 MiB resident, where importing mcpx's modules took 22).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time

PROC = "/proc"
GRACE = 3.0  # how long a group has between SIGTERM and SIGKILL


# ---- what /proc says of a process


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and ')'): state, ppid, pgrp, …"""
    try:
        return _read(f"{PROC}/{pid}/stat").rsplit(")", 1)[1].split()
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
    for name in os.listdir(PROC):
        if not name.isdigit():
            continue
        fields = _stat(int(name))
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid and int(fields[19]) >= since:
            members.append(int(name))
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


def end_recorded(record: str) -> list[int]:
    """End every server group in a gone daemon's record, then remove the record; the pids signalled."""
    try:
        data = json.loads(_read(record))
        children = {int(pid): int(entry[0]) for pid, entry in data["children"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        children = {}
    ended = [member for pid, started in children.items() for member in end_group(pid, started)]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record)
    return ended


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def watch(record: str) -> None:
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
    watch(sys.argv[1])
