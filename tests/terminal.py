"""A real pseudo-terminal for a test to type at: `mcpx call` prompting, a script's `client.ask`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import select
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, Literal

import aiohttp

from harness import PATIENCE, Daemon

FILED_ELSEWHERE = {"title": "Filed from elsewhere", "priority": "p2"}  # the demo's create_issue, answered over REST


class Terminal:
    """An mcpx command (`args`) on a real pseudo-terminal, typed at like a person would; killed on leaving a `with`.
    `argv`: another command instead (a script that uses mcpx), with the daemon's environment."""

    def __init__(self, daemon: Daemon, *args: str, argv: Sequence[str] | None = None) -> None:
        command = list(argv) if argv is not None else [sys.executable, "-m", "mcpx", *args]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            # a person's terminal: Ctrl-C and Ctrl-\ work there, even when the suite itself was started in the
            # background of a shell script (which ignores SIGINT and SIGQUIT for all it starts, as POSIX says)
            for sig in (signal.SIGINT, signal.SIGQUIT):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.chdir(daemon.home)
            os.execve(command[0], command, daemon.env)
        self.command = command
        self.out = b""
        self.code: int | None = None

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        if self.code is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    def _read(self) -> bool:
        """What the terminal shows within a moment; False once it is closed (the program ended)."""
        ready, _, _ = select.select([self.fd], [], [], 0.1)
        if ready:
            try:
                self.out += os.read(self.fd, 4096)
            except OSError:
                return False
        return True

    def expect(self, text: str, timeout: float = PATIENCE) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.out:
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {text!r} in:\n{self.out.decode(errors='replace')}")
            if not self._read():
                break

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def finish(self, timeout: float = PATIENCE) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read()
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
                return self.code
        raise AssertionError(f"{' '.join(self.command)} did not finish within {timeout:.0f}s; the terminal shows:\n"
                             f"{self.out.decode(errors='replace')}")


async def end_elsewhere(term: Terminal, http: aiohttp.ClientSession, opened: dict[str, Any],
                        how: Literal["answered", "abandoned"]) -> None:
    """With the demo's create_issue question (`opened`: its elicit.open record) asked at `term`, end it from another
    door once the prompt is at its first field: `answered`, accepted over REST with FILED_ELSEWHERE; `abandoned`, its
    call cancelled. Returns once the terminal says how it ended."""
    await asyncio.to_thread(term.expect, "title (string; min length 3")
    if how == "answered":
        path, body = f"/v1/elicit/{opened['elicit']}/accept", {"content": FILED_ELSEWHERE}
        said = f"({opened['elicit']} was answered elsewhere: accept by person:rest)"
    else:
        path, body, said = f"/v1/tasks/{opened['task']}/cancel", None, f"({opened['elicit']} was abandoned"
    async with http.post(path, json=body) as resp:
        assert resp.status == 200, await resp.text()
    await asyncio.to_thread(term.expect, said)
