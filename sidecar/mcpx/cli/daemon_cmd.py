"""`mcpx daemon` and `mcpx status`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from pydantic import ValidationError

from mcpx.cli.client import ApiError, DaemonClient
from mcpx.cli.common import add_json_flag, emit_json, run
from mcpx.cli.render import upstream_lines
from mcpx.daemon.origin import Origin
from mcpx.paths import StatePaths


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("daemon", help="run the daemon in the foreground (one per state directory)")
    p.add_argument("--listen", metavar="HOST:PORT", help="also serve /v1 and /mcp on loopback TCP, behind a bearer token")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    p.add_argument("--demo", action="store_true", help="once serving, raise one real question from the demo server")
    # how `mcpx serve` and `mcpx daemon start` run it: detached from whoever started it (daemon/launch.py)
    p.add_argument("--detach", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=daemon)

    p = sub.add_parser("status", help="is the daemon running, what config, how many questions wait, which "
                                      "upstream instances run and the memory they hold")
    add_json_flag(p)
    p.set_defaults(func=run(status))


def daemon(args: argparse.Namespace) -> int:
    if args.detach:
        from mcpx.daemon.launch import detach
        from mcpx.paths import StatePaths

        detach(StatePaths.current())  # returns in the detached daemon only
    from mcpx.daemon.server import DaemonError
    from mcpx.daemon.server import run as run_daemon

    try:
        return asyncio.run(run_daemon(args.listen, args.verbose, args.demo))
    except DaemonError as exc:
        print(f"mcpx daemon: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


def recorded_origin(paths: StatePaths, pid: int) -> Origin | None:
    """How the daemon with this pid was started, from its daemon.json (none for a daemon elsewhere, or older)."""
    try:
        info = json.loads(paths.daemon_json.read_text())
        return Origin.model_validate(info["origin"]) if info.get("pid") == pid else None
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None


async def status(args: argparse.Namespace) -> int:
    async with DaemonClient() as client:
        health = await client.get("/v1/health")
        try:
            upstreams = await client.get("/v1/upstreams")
        except ApiError as exc:
            if exc.status not in (404, 503):
                raise
            upstreams = None  # a daemon older than this command, or one whose gateway is not running
    origin = recorded_origin(client.paths, health["pid"])
    if args.json:
        emit_json({**health, "upstreams": upstreams, "origin": origin.model_dump(exclude_none=True) if origin else None})
        return 0
    print(f"mcpx daemon {health['version']} · pid {health['pid']} · since {health['startedAt']}")
    if origin is not None:
        print(f"  started   {origin.describe()}")
    print(f"  socket    {health['socket']}")
    if health.get("listen"):
        print(f"  listen    http://{health['listen']} (token: {client.paths.token})")
    print(f"  config    {health['config']}")
    if health.get("configError"):
        print(f"  ! config  {health['configError']} (the previous config stays in force)")
    servers = health.get("servers") or []
    commands = health.get("serverCommands") or {}
    width = max((len(name) for name in servers), default=0)
    print("  servers   " + ("\n            ".join(f"{name:<{width}}  {commands.get(name, '')}".rstrip()
                                                  for name in servers) or "(none)"))
    print(f"  pending   {health['pending']} question(s)"
          + ("  → mcpx tui (or mcpx elicit list)" if health["pending"] else ""))
    for line in upstream_lines(upstreams) if upstreams is not None else []:
        print(line)
    return 0
