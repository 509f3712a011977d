"""Starting a daemon in the background for a command that needs one (`mcpx serve`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mcpx.sockets import socket_alive
from mcpx.paths import StatePaths


class LaunchError(Exception):
    pass


def ensure_daemon(paths: StatePaths, timeout: float = 15.0) -> bool:
    """Start a daemon unless one answers already. True when this call started it."""
    if socket_alive(paths.socket):
        return False
    paths.ensure()
    out = open(paths.root / "daemon.out", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "daemon"], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        start_new_session=True, env=os.environ.copy(),
    )
    out.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if socket_alive(paths.socket, timeout=0.2):
            return True
        code = proc.poll()
        if code is not None:
            if socket_alive(paths.socket, timeout=0.2):
                return False  # another process started one first
            raise LaunchError(f"the daemon exited with code {code} while starting: {_tail(paths)}")
        time.sleep(0.02)
    raise LaunchError(f"the daemon did not open {paths.socket} within {timeout:.0f}s: {_tail(paths)}")


def _tail(paths: StatePaths, lines: int = 8) -> str:
    try:
        text = (paths.root / "daemon.out").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no output)"
    return " | ".join(text[-lines:]) or "(no output)"
