"""Facts about a process by its pid — alive, its parent, its command line — for processes that are not ours.

Read from /proc on Linux, from `ps` elsewhere (macOS). A command line is always shown masked: it may carry
a credential (masking.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mcpx.shared.masking import shown_command

PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (which may hold spaces and ')'): state, ppid, …"""
    try:
        return (PROC / str(pid) / "stat").read_text(errors="replace").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _ps(pid: int, field: str) -> str | None:
    try:
        done = subprocess.run(["ps", "-o", f"{field}=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def alive(pid: int) -> bool:
    """Is there a live process with this pid? A zombie (ended, not yet reaped by whoever adopted it) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's, and there
    fields = _stat_fields(pid)
    if fields is not None:
        return fields[0] not in ("Z", "X")
    state = _ps(pid, "stat")
    return state is None or not state.startswith("Z")


def parent(pid: int) -> int | None:
    fields = _stat_fields(pid)
    if fields is not None:
        return int(fields[1])
    ppid = _ps(pid, "ppid")
    return int(ppid) if ppid and ppid.isdigit() else None


def command_line(pid: int) -> str | None:
    """The process's command line as mcpx shows one (masked), or None if it cannot be read."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        text = _ps(pid, "command")  # ps joins the arguments with spaces: split back, as well as can be
        return shown_command(text.split()) if text else None
    argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return shown_command(argv) if argv else None
