"""What every command shares: running async bodies, printing JSON, turning errors into exit codes."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from mcpx.cli.client import EX_UNAVAILABLE, ApiError, NoDaemon

EX_TEMPFAIL = 75  # the call waits for input; nothing here can answer it (yet)

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
                print(f"mcpx: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
    return runner


def run(body: Command) -> Callable[[argparse.Namespace], int]:
    """An async command body, run to completion."""
    return guarded(lambda args: asyncio.run(body(args)))


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the API's JSON instead of text")
