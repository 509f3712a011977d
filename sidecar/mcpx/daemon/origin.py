"""How a daemon was started, and by whom: kept in daemon.json, shown by `mcpx status`.

A daemon started in the background (by `mcpx serve`, `mcpx daemon start|restart`) is nobody's child once
it runs (launch.py), so its parent tells nothing: the launcher hands over who it is, and who ran it (the
host: opencode, a shell), in MCPX_DAEMON_ORIGIN. A daemon run as a user service is told so by its unit
(MCPX_SERVICE, written by `mcpx daemon install`). Otherwise it runs in the foreground of a terminal, or of
some other process.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import MutableMapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from mcpx.presentation.text import plain
from mcpx.system import processes

ORIGIN_ENV = "MCPX_DAEMON_ORIGIN"  # set by a launcher for the daemon it starts; the daemon takes it out
SERVICE_ENV = "MCPX_SERVICE"  # "systemd:mcpx.service", "launchd:io.mcpx.daemon": set by the service's own file

Kind = Literal["serve", "command", "service", "terminal", "process"]


class Proc(BaseModel):
    model_config = ConfigDict(extra="ignore")
    pid: int
    command: str | None = None

    def shown(self) -> str:
        return f"pid {self.pid}" + (f": {plain(self.command, 160)}" if self.command else "")


class Origin(BaseModel):
    """kind: serve (by `mcpx serve`, for a host), command (`mcpx daemon start|restart`), service (a user
    service), terminal (`mcpx daemon` in the foreground of a terminal), process (in the foreground of another
    process). launcher: the mcpx process that started it in the background; host: who ran that launcher,
    or, in the foreground, the daemon's parent."""

    model_config = ConfigDict(extra="ignore")  # a daemon.json written by another version
    kind: Kind
    launcher: Proc | None = None
    host: Proc | None = None
    tty: str | None = None
    service: str | None = None

    def describe(self) -> str:
        """One line for `mcpx status`."""
        host = self.host.shown() if self.host else "a process that has gone"
        if self.kind == "serve":
            by = f"mcpx serve ({self.launcher.shown() if self.launcher else 'gone'})"
            return f"in the background by {by}, run by {host}; it outlives them"
        if self.kind == "command":
            return (f"in the background by `{self.launcher.command if self.launcher else 'mcpx daemon start'}`"
                    + (f" from {self.tty}" if self.tty else "") + f", run by {host}")
        if self.kind == "service":
            return f"as a user service ({self.service})"
        if self.kind == "terminal":
            return f"in the foreground of a terminal ({self.tty}), run by {host}; it stops with it"
        return f"in the foreground of {host}"


def _tty() -> str | None:
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.ttyname(fd)
        except OSError:
            continue
    return None


def _proc(pid: int) -> Proc:
    return Proc(pid=pid, command=processes.command_line(pid))


def for_launch(kind: Literal["serve", "command"], what: str) -> str:
    """What a launcher (this process: `what`, e.g. "mcpx serve") hands the daemon it starts, as ORIGIN_ENV."""
    origin = Origin(kind=kind, launcher=Proc(pid=os.getpid(), command=what), host=_proc(os.getppid()), tty=_tty())
    return origin.model_dump_json(exclude_none=True)


def take(environ: MutableMapping[str, str] | None = None) -> Origin:
    """How this daemon was started; ORIGIN_ENV is removed, so nothing the daemon starts inherits it."""
    env = os.environ if environ is None else environ
    handed = env.pop(ORIGIN_ENV, None)
    if handed:
        try:
            return Origin.model_validate(json.loads(handed))
        except (ValueError, ValidationError):
            pass  # not ours to trust: judged as if nobody had said
    if service := env.get(SERVICE_ENV):
        return Origin(kind="service", service=service)
    host = _proc(os.getppid())
    if sys.stdin is not None and (tty := _tty()) is not None:
        return Origin(kind="terminal", host=host, tty=tty)
    return Origin(kind="process", host=host)
