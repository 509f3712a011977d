"""What every command shares: running async bodies, printing JSON, turning errors into exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from mcpx.client.transport import EX_UNAVAILABLE, ApiError, NoDaemon

Doc = TypeVar("Doc")  # a reply as its command reads it (client/replies.py)

EX_USAGE = 2  # what was given is wrong: a malformed id, an option out of range
EX_DATAERR = 65  # an answer that does not fit its question (each field's problem is named)
EX_TEMPFAIL = 75  # the call waits for input; nothing here can answer it (yet)
# what each refusal of the daemon exits with; the rest (403 not yours, 409 answered already, 410 gone) is 1
_EXIT = {400: EX_USAGE, 422: EX_DATAERR}
_WHERE_TO_LOOK = {"question": "mcpx elicit list --state all lists every question",
                  "task": "mcpx task list --state all lists every call"}


def refusal(exc: ApiError) -> str:
    """A refusal of the daemon's, in the words of the command line: no REST words, and where to look next."""
    message = str(exc)
    for prefix in ("invalid path: ", "invalid query: ", "invalid body: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
            name, _, rest = message.partition(": ")
            message = rest if name in ("id", "action") and rest else message
    if exc.status == 404:
        hint = next((h for what, h in _WHERE_TO_LOOK.items() if message.startswith(f"no {what}")), None)
        if hint:
            message += f" ({hint})"
    return message

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def guarded(body: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command, with the daemon's refusals and absence turned into messages and exit codes."""
    def runner(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except NoDaemon as exc:
            print(f"mcpx: {exc}", file=sys.stderr)
            return EX_UNAVAILABLE
        except ApiError as exc:
            if getattr(args, "json", False):
                print(json.dumps(exc.body, indent=2))
            else:
                print(f"mcpx: {refusal(exc)}", file=sys.stderr)
            return _EXIT.get(exc.status, 1)
        except KeyboardInterrupt:
            return 130
    return runner


def run(body: Command) -> Callable[[argparse.Namespace], int]:
    """An async command body, run to completion (asyncio imported then: a command without one starts without it)."""
    def in_loop(args: argparse.Namespace) -> int:
        import asyncio

        return asyncio.run(body(args))
    return guarded(in_loop)


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def shown(args: argparse.Namespace, path: str, say: Callable[[Doc], None], post: dict[str, Any] | None = None) -> Doc:
    """A command that is one request: the daemon's document at `path` (GET; POSTed `post`, where given), printed as
    the API's JSON under --json, else said in words by `say`. One blocking exchange (DaemonApi): no event loop."""
    from mcpx.client.transport import DaemonApi

    api = DaemonApi()
    doc: Doc = api.get(path) if post is None else api.post(path, post)
    if args.json:
        emit_json(doc)
    else:
        say(doc)
    return doc


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the API's JSON instead of text")
