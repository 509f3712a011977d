"""`mcpx person enroll|list|revoke`: people's passkeys, which alone accept a question that needs presence
(docs/presence.md). Each is a client of /v1/people; the enrolment link, like every inbox address, is handed only
to a process that is not in an agent's shell.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcpx.cli.common import add_json_flag, emit_json, guarded
from mcpx.client.transport import DaemonApi


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("person", help="people's passkeys: enroll, list, revoke (docs/presence.md)",
                       description="A question that needs presence is accepted only with a passkey of a person "
                                   "allowed to answer it. Each person enrolls theirs through a single-use link.")
    psub = p.add_subparsers(dest="person_command", required=True, metavar="SUBCOMMAND")
    e = psub.add_parser("enroll", help="print a single-use link where NAME creates a passkey",
                        description="Prints a link (on localhost: a passkey is bound to a name, never to "
                                    "127.0.0.1) to a page where NAME creates a passkey. Good once, for 15 minutes. "
                                    "NAME's first passkey is trusted on first use; once NAME has one, another is "
                                    "added only when a passkey of NAME's (or of the daemon's owner's) signs it on "
                                    "that page. NAME defaults to $MCPX_PERSON.")
    e.add_argument("name", nargs="?", default=None)
    add_json_flag(e)
    e.set_defaults(func=guarded(enroll_cmd))
    ls = psub.add_parser("list", help="each person's passkeys: id, created, last used")
    add_json_flag(ls)
    ls.set_defaults(func=guarded(list_cmd))
    # a passkey's id is base64url, so one in 64 begins with '-', which argparse reads as an option: `--` first
    r = psub.add_parser("revoke", help="revoke one of NAME's passkeys: it signs nothing from now on",
                        epilog="An id that begins with '-' goes after --: mcpx person revoke NAME -- ID")
    r.add_argument("name")
    r.add_argument("id", help="the passkey's id, as `mcpx person list` shows it (after -- if it begins with '-')")
    add_json_flag(r)
    r.set_defaults(func=guarded(revoke_cmd))


def enroll_cmd(args: argparse.Namespace) -> int:
    name = args.name or os.environ.get("MCPX_PERSON")
    if not name:
        raise SystemExit("mcpx person enroll: give a NAME (or set MCPX_PERSON): whose passkey it is")
    api = DaemonApi()
    # who asks for the link: the audit says who enrolled whom
    link = api.post(f"/v1/people/{name}/enroll", None, headers={"X-Mcpx-Answerer": api.answerer})
    if args.json:
        emit_json({"url": link["url"], "person": name, "terms": link["terms"]})
    else:
        print(link["url"])
        print(link["terms"], file=sys.stderr)  # the link alone on stdout, for a script to pass on
    return 0


def _when(value: Any) -> str:
    return str(value) if value else "never"


def list_cmd(args: argparse.Namespace) -> int:
    keys = DaemonApi().get("/v1/people/passkeys")["passkeys"]
    if args.json:
        emit_json({"passkeys": keys})
    else:
        lines = [f"{key['person']}  {key['id']}  created {key['created']}  last used {_when(key.get('lastUsed'))}"
                 for key in keys]
        print("\n".join(lines) or "no passkeys enrolled (mcpx person enroll NAME)")
    return 0


def revoke_cmd(args: argparse.Namespace) -> int:
    body = DaemonApi().request("DELETE", f"/v1/people/{args.name}/passkeys/{args.id}")
    if args.json:
        emit_json(body.body)
    else:
        print(f"revoked {args.name}'s passkey {args.id}")
    return 0
