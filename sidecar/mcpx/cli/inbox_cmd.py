"""`mcpx inbox` (the web inbox, opened signed in) and `mcpx elicit link ID` (one question, for another device).

Both ask the daemon over its socket, which hands these addresses only to a process that is not in an agent's
shell: each answers as the person.
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlencode

from mcpx.cli.common import add_json_flag, emit_json, guarded
from mcpx.client.transport import DaemonApi


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("inbox", help="open the web inbox in your browser, signed in (--print: print its address)",
                       description="The web inbox: the waiting questions, live, each answered on its own page (as "
                                   "person:web). The address carries the inbox's token: opening it signs that "
                                   "browser in (a cookie). Treat it as a password.")
    p.add_argument("--print", action="store_true", help="print the address instead of opening a browser")
    p.add_argument("--session", help="only this session's questions")
    p.add_argument("--server", help="only this server's questions")
    add_json_flag(p)
    p.set_defaults(func=guarded(inbox_cmd))


def register_link(esub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = esub.add_parser("link", help="a link that opens this one question on another device (with a QR code)",
                        description="Prints a link that opens this one question, with no other sign-in, for one "
                                    "answer, while it is pending; on a terminal also as a QR code. Anyone with it "
                                    "can answer the question as you: send it only to yourself.")
    p.add_argument("id")
    p.add_argument("--as", dest="person", metavar="NAME", help="an approver's own link: it answers as them, once")
    add_json_flag(p)
    p.set_defaults(func=guarded(link_cmd))


def inbox_cmd(args: argparse.Namespace) -> int:
    import webbrowser  # imported by this command alone: `mcpx elicit …` registers link_cmd beside it

    url = DaemonApi().get("/v1/inbox")["url"]
    filters = {k: v for k, v in (("session", args.session), ("server", args.server)) if v}
    if filters:
        url += "&" + urlencode(filters)
    if args.json:
        emit_json({"url": url})
    elif args.print or not webbrowser.open(url):
        print(url)
    else:
        print("opened the web inbox in your browser (mcpx inbox --print shows its address)", file=sys.stderr)
    return 0


def link_cmd(args: argparse.Namespace) -> int:
    from mcpx.presentation.urlfacts import LOOPBACK_NOTE, reachable_elsewhere  # this command's alone (ipaddress)

    url = DaemonApi().get(f"/v1/elicit/{args.id}/link", params={"as": args.person})["url"]
    here_only = not reachable_elsewhere(url)
    if args.json:
        emit_json({"url": url, "reachableElsewhere": not here_only})
        return 0
    print(url)
    if here_only:
        # no QR code "for your phone" that no phone can open: say so, and how to serve it where it can
        print(LOOPBACK_NOTE, file=sys.stderr)
        return 0
    if sys.stdout.isatty():
        import segno

        segno.make(url, error="l").terminal(out=sys.stdout, compact=True)
        print(f"Good for one answer while {args.id} waits. Anyone with it can answer as you.")
    return 0
