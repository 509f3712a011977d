"""`mcpx tui`: the terminal inbox (Textual), answering as person:tui."""

from __future__ import annotations

import argparse
import sys

from mcpx.cli.common import run
from mcpx.client.daemon_client import DaemonClient
from mcpx.client.transport import agent_environment

AGENT_WARNING = ("this terminal is an agent's shell (or descends from one): the daemon refuses answers as the "
                 "person from here; run `mcpx tui` in your own terminal")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tui", help="the terminal inbox: pending questions, live; Enter opens one, a/d/c answer it",
        description="The pending questions, oldest first, with time left, live from the daemon's event stream. "
                    "Enter opens one: its form (defaults filled in, checked as the daemon checks) or its URL. "
                    "a accepts, d declines (with an optional reason), c cancels, o opens a URL (after asking), "
                    "Escape goes back, q quits. Answers are recorded as person:tui.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--session", help="only this session's questions")
    p.add_argument("--server", help="only this server's questions")
    p.set_defaults(func=run(tui_cmd))


async def tui_cmd(args: argparse.Namespace) -> int:
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print("mcpx: `mcpx tui` needs a terminal; elsewhere use `mcpx elicit list` and `mcpx elicit watch`",
              file=sys.stderr)
        return 2
    from mcpx.cli.tui.inbox_app import ANSWERER, InboxApp  # Textual loads only for this command

    async with DaemonClient(answerer=ANSWERER) as client:
        # the filters are checked, and the daemon found, before the screen is taken over
        await client.get("/v1/elicit", params={"session": args.session, "server": args.server, "limit": 1})
        app = InboxApp(client, session=args.session, server=args.server,
                       warning=AGENT_WARNING if agent_environment() else None)
        await app.run_async()
    return 0
