"""`mcpx auth list|login|logout|complete`: logins to HTTP servers behind mcpx (docs/auth.md).

A login belongs to the daemon's person and machine: these ask that daemon, which keeps the tokens in the OS
keychain. No token is ever printed, by these or any command.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from mcpx.cli.common import add_json_flag, emit_json, guarded, run, shown
from mcpx.client.daemon_client import DaemonClient, wait_for_answer

if TYPE_CHECKING:
    from mcpx.client.replies import LoginDoc


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    auth = sub.add_parser("auth", help="logins to HTTP servers (OAuth): list, login, logout, complete")
    asub = auth.add_subparsers(dest="auth_cmd", required=True, metavar="COMMAND")
    p = asub.add_parser("list", help="each HTTP server's login: as whom, scopes, expiry, or needs login")
    add_json_flag(p)
    p.set_defaults(func=run(auth_list))
    p = asub.add_parser("login", help="log in to a server now: prints the link (a question every door shows) and "
                                      "waits until the login is done")
    p.add_argument("server")
    p.add_argument("--no-wait", action="store_true", help="print the link and return")
    add_json_flag(p)
    p.set_defaults(func=run(auth_login))
    p = asub.add_parser("logout", help="forget a server's login (revoked where the server offers it)")
    p.add_argument("server")
    add_json_flag(p)
    p.set_defaults(func=guarded(auth_logout))
    p = asub.add_parser("complete", help="finish a login with the address the browser ended on (a browser on "
                                         "another device that cannot reach this machine)")
    p.add_argument("url", help="the whole address from the browser's address bar after the login")
    add_json_flag(p)
    p.set_defaults(func=guarded(auth_complete))


def _when(at: float | None) -> str:
    if at is None:
        return ""
    left = at - time.time()
    return "expired" if left <= 0 else f"expires in {int(left // 60)}m{int(left % 60):02d}s"


def _line(row: LoginDoc) -> str:
    state = row["state"]
    if state == "logged-in":
        who = f" as {row['subject']}" if row.get("subject") else ""
        scopes = f", scopes {' '.join(row['scopes'])}" if row.get("scopes") else ""
        return f"logged in{who} at {row.get('issuer')}{scopes}, {_when(row.get('expiresAt')) or 'no expiry given'}"
    if state == "asking":
        return f"needs login: asked in {row['question']} (its link is in the inbox; `mcpx elicit show " \
               f"{row['question']}`)"
    if state == "needs-login":
        return f"needs login: {row.get('problem') or 'the next call asks'}"
    return "no login (none asked for yet)"


async def auth_list(args: argparse.Namespace) -> int:
    async with DaemonClient() as client:
        found = await client.get("/v1/auth")
    if args.json:
        emit_json(found)
        return 0
    if not found["logins"]:
        print("no HTTP server behind mcpx (only those log in)")
    for row in found["logins"]:
        print(f"{row['server']:<20} {_line(row)}")
    return 0


async def auth_login(args: argparse.Namespace) -> int:
    async with DaemonClient() as client:
        started = await client.post(f"/v1/auth/{args.server}/login")
    if args.json:
        emit_json(started)
    else:
        print(f"Log in to {args.server} at this address (it is also question {started['question']}, in the inbox "
              f"and every door):\n\n  {started['url']}\n", file=sys.stderr)
        print("If the browser ends on a page this machine cannot serve, copy its address and run "
              "`mcpx auth complete ADDRESS`.", file=sys.stderr)
    if args.no_wait or args.json:
        return 0
    answer = await wait_for_answer(started["question"], 24 * 3600)
    if answer is None:
        print("mcpx: nobody logged in", file=sys.stderr)
        return 1
    outcome = answer
    if outcome.get("action") == "accept":
        print(f"logged in to {args.server}")
        return 0
    print(f"mcpx: not logged in: {outcome.get('by')} said {outcome.get('action')}", file=sys.stderr)
    return 1


def auth_logout(args: argparse.Namespace) -> int:
    def say(done: dict[str, Any]) -> None:
        if not done["wasLoggedIn"]:
            print(f"{args.server}: no login was kept")
        else:
            print(f"{args.server}: logged out" + (", the tokens revoked at the authorization server" if done["revoked"]
                                                  else " (the authorization server offers no revocation: the "
                                                       "tokens were forgotten here)"))

    shown(args, f"/v1/auth/{args.server}/logout", say, post={})
    return 0


def auth_complete(args: argparse.Namespace) -> int:
    shown(args, "/v1/auth/complete", lambda done: print(f"logged in to {done['server']}"),
                post={"url": args.url})
    return 0
