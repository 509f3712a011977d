"""`mcpx serve`: the MCP surface on stdio, for hosts like opencode that start their servers as commands.

It starts a daemon if none runs. On the daemon's unix socket it hands its stdin and stdout to
the daemon and only waits (cli/serve_handoff.py), so the host talks to the daemon directly. To a
daemon reached over TCP (MCPX_DAEMON_URL), or one that takes no hand-off, it is a pump between
stdin/stdout and the daemon's stream endpoint (cli/serve_pump.py). Either way it survives a daemon
restart: it reconnects, replays the client's `initialize`, and answers the requests that were in
flight with an error saying so, instead of leaving the host waiting.

A host starts one serve per session: the pump, on asyncio and aiohttp, is imported only when it runs, so a
hand-off loads neither.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcpx.cli import serve_handoff
from mcpx.daemon.launch import LaunchError, ensure_daemon
from mcpx.system.paths import StatePaths


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="the MCP surface on stdio (for opencode and other MCP hosts); starts a daemon "
                                     "if none runs",
                       description="mcpx as an MCP server on stdio, for a host that runs its servers as commands "
                                   "(opencode's MCP entry): the tools of every server behind mcpx as SERVER_TOOL, "
                                   "and mcpx's own. It starts a daemon if none runs (detached: it outlives the "
                                   "host) and survives the daemon's restart.")
    p.add_argument("--server", help="serve one upstream server under its own tool names, instead of all of them "
                                    "as SERVER_TOOL")
    p.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    paths = StatePaths.current()
    initialize: dict[str, Any] | None = None
    initialized = False
    if not os.environ.get("MCPX_DAEMON_URL"):
        try:
            ensure_daemon(paths)
        except LaunchError as exc:
            print(f"mcpx serve: {exc}", file=sys.stderr)
            return 69
        if serve_handoff.possible():
            handoff = serve_handoff.Handoff(paths, serve_handoff.hello_from_environment(args.server))
            try:
                ended = handoff.run()
            except serve_handoff.HandoffRefused as exc:
                print(f"mcpx serve: {exc}", file=sys.stderr)
                return 2
            except KeyboardInterrupt:
                return 0
            if ended is not None:
                return ended
            # no daemon takes the hand-off (an older one): the pump carries on with the client's handshake
            initialize, initialized = handoff.hello.initialize, handoff.hello.initialized
    from mcpx.cli.serve_pump import pump

    return pump(paths, args.server, initialize, initialized)
