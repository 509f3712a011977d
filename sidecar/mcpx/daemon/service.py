"""The daemon as a user service, for those who want it always on: a systemd user unit (Linux) or a launchd
agent (macOS), written by `mcpx daemon install`, removed by `--uninstall`.

mcpx writes the file and prints the commands that enable it; it runs no service manager itself. The
service runs this very installation (`python -m mcpx daemon`) in the person's home, with the variables that
say where mcpx keeps its state and config, and PATH (the servers behind mcpx are found on it). It is marked
MCPX_SERVICE, so `mcpx status` says how it runs and `mcpx daemon restart` leaves it to its manager.
plistlib (with an XML parser under it, ~15 ms) is imported where a launchd agent is read or written: `mcpx daemon`
imports this module, and only macOS's `mcpx daemon install` needs it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcpx.daemon.origin import SERVICE_ENV
from mcpx.shared.errors import McpxError
from mcpx.system.paths import StatePaths

Manager = Literal["systemd", "launchd"]
UNIT = "mcpx.service"
LABEL = "io.mcpx.daemon"
MARK = "# Written by `mcpx daemon install`; `mcpx daemon install --uninstall` removes it."
# what decides where the daemon keeps its state and finds its config, and what its servers need to be found
CARRIED = ("MCPX_HOME", "MCPX_CONFIG", "MCPX_USER_CONFIG", "MCPX_SSE_HEARTBEAT", "XDG_STATE_HOME", "XDG_CONFIG_HOME",
           "PATH")


class ServiceError(McpxError):
    """A file mcpx will not write or remove; the message says which and why."""


def platform_manager() -> Manager:
    return "launchd" if sys.platform == "darwin" else "systemd"


@dataclass(frozen=True)
class Service:
    manager: Manager
    path: Path
    text: str
    enable: list[str]  # the commands that enable and start it, in order
    disable: list[str]  # those that stop it and make its manager forget it, once the file is gone

    def ours(self, existing: str) -> bool:
        if self.manager == "systemd":
            return MARK in existing
        import plistlib

        try:
            label = plistlib.loads(existing.encode()).get("Label")
            return isinstance(label, str) and label == LABEL
        except Exception:
            return False


def _environment(environ: Mapping[str, str], marker: str) -> dict[str, str]:
    return {SERVICE_ENV: marker, **{k: environ[k] for k in CARRIED if environ.get(k)}}


def _systemd_quote(word: str) -> str:
    """A word of ExecStart= or Environment=, as systemd reads it: quoted, with % (specifiers), $ (variables),
    backslashes and quotes escaped."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def systemd(home: Path, environ: Mapping[str, str], args: list[str]) -> Service:
    config = Path(environ["XDG_CONFIG_HOME"]) if environ.get("XDG_CONFIG_HOME") else home / ".config"
    command = [sys.executable, "-m", "mcpx", "daemon", *args]
    lines = [
        MARK,
        "[Unit]",
        "Description=mcpx daemon: an MCP gateway whose questions are durable state",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(_systemd_quote(w) for w in command),
        "WorkingDirectory=%h",
        *(f"Environment={_systemd_quote(f'{k}={v}')}" for k, v in _environment(environ, f"systemd:{UNIT}").items()),
        "Restart=on-failure",
        "RestartSec=5",
        "TimeoutStopSec=30",  # it drains in 3 s, then stops its servers
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return Service("systemd", config / "systemd" / "user" / UNIT, "\n".join(lines),
                   enable=["systemctl --user daemon-reload", f"systemctl --user enable --now {UNIT}"],
                   disable=[f"systemctl --user stop {UNIT}", "systemctl --user daemon-reload"])


def launchd(home: Path, environ: Mapping[str, str], args: list[str], paths: StatePaths) -> Service:
    path = home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    agent = {
        "Label": LABEL,
        "ProgramArguments": [sys.executable, "-m", "mcpx", "daemon", *args],
        "EnvironmentVariables": _environment(environ, f"launchd:{LABEL}"),
        "WorkingDirectory": str(home),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # again after a crash, not after `mcpx daemon stop`
        "StandardOutPath": str(paths.root / "daemon.out"),
        "StandardErrorPath": str(paths.root / "daemon.out"),
    }
    import plistlib

    domain = f"gui/{os.getuid()}"
    return Service("launchd", path, plistlib.dumps(agent).decode(),
                   enable=[f"launchctl bootstrap {domain} {path}"], disable=[f"launchctl bootout {domain}/{LABEL}"])


def plan(manager: Manager, args: list[str], environ: Mapping[str, str] | None = None,
         home: Path | None = None) -> Service:
    env = os.environ if environ is None else environ
    home = home or Path.home()
    return systemd(home, env, args) if manager == "systemd" else launchd(home, env, args, StatePaths.current())


def install(service: Service) -> bool:
    """Write the service's file; False when it was there already, as it would be written."""
    if service.path.exists():
        existing = service.path.read_text(errors="replace")
        if existing == service.text:
            return False
        if not service.ours(existing):
            raise ServiceError(f"{service.path} exists and was not written by mcpx; move it away first")
    service.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = service.path.with_name(f".{service.path.name}.{os.getpid()}.tmp")
    tmp.write_text(service.text)
    os.replace(tmp, service.path)
    return True


def uninstall(service: Service) -> list[Path]:
    """Remove the service's file, and the links `systemctl enable` made to it: what was removed."""
    if not service.path.exists():
        return []
    if not service.ours(service.path.read_text(errors="replace")):
        raise ServiceError(f"{service.path} was not written by mcpx; it is left as it is")
    gone = [service.path]
    if service.manager == "systemd":
        for link in service.path.parent.glob(f"*.wants/{service.path.name}"):
            if link.is_symlink():
                gone.append(link)
    for path in gone:
        path.unlink()
    return gone
