"""This test worker's fork server for the stdio peers (tests/peers/fork_server.py): started on first use, stopped
at the session's end (tests/conftest.py) or, at the latest, when this process is gone (it reads our pipe to EOF).

A peer started through it costs a fork instead of the mcp SDK's import (docs/choices.md says why and when a test
keeps the direct command)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import PEERS

SERVER = PEERS / "fork_server.py"
CLIENT = PEERS / "fork_client.py"


class ForkServer:
    def __init__(self) -> None:
        # a short path of our own: a unix socket's path has ~107 bytes
        self.dir = Path(tempfile.mkdtemp(prefix="mcpx-peers-"))
        self.socket = self.dir / "fork.sock"
        self.log = open(f"{self.socket}.log", "wb")  # noqa: SIM115 - closed in stop
        # stdin is our pipe: its end (this process gone, or stop) ends the server and its children
        self.proc = subprocess.Popen([sys.executable, str(SERVER), str(self.socket)], stdin=subprocess.PIPE,
                                     stdout=self.log, stderr=self.log, cwd=PEERS)
        Path(f"{self.socket}.pid").write_text(str(self.proc.pid))

    def command(self, script: Path, args: tuple[str, ...]) -> tuple[str, list[str]]:
        return sys.executable, ["-S", "-E", str(CLIENT), str(self.socket), str(script), *args]

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_server: ForkServer | None = None
_owner: int | None = None


def fork_server() -> ForkServer:
    """This process's fork server, started now if it is not yet (a fork of this process starts its own)."""
    global _server, _owner
    if _server is None or _owner != os.getpid():
        _server, _owner = ForkServer(), os.getpid()
        atexit.register(stop_fork_server)  # a run that never reaches the session's end (--collect-only, say)
    return _server


def stop_fork_server() -> None:
    global _server
    if _server is not None and _owner == os.getpid():
        _server.stop()
        _server = None
