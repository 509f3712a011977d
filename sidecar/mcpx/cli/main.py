"""`mcpx`: the entry point. Each command group lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import os
import sys

from mcpx import __version__

EPILOG = """\
exit codes: 0 ok (accept) · 1 failed (decline) · 2 usage · 69 no daemon · 75 waits for input (cancel, expiry)
state: $MCPX_HOME (else $XDG_STATE_HOME/mcpx, else ~/.local/state/mcpx) · config: $MCPX_CONFIG, else
~/.config/mcpx/config.json under the nearest .mcpx/config.json"""


def parser() -> argparse.ArgumentParser:
    from mcpx.cli import (
        audit_cmd,
        auth_cmd,
        call_cmd,
        daemon_cmd,
        doctor_cmd,
        elicit_cmd,
        inbox_cmd,
        person_cmd,
        policy_cmd,
        secrets_cmd,
        serve_cmd,
        tui_cmd,
    )
    from mcpx.cli.hosts import claude_cmd, codex_cmd, gemini_cmd, opencode_cmd

    top = argparse.ArgumentParser(
        prog="mcpx", description="An MCP gateway whose questions are durable state with a deadline.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"mcpx {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (daemon_cmd, serve_cmd, elicit_cmd, tui_cmd, inbox_cmd, person_cmd, call_cmd, audit_cmd,
                   policy_cmd, opencode_cmd, claude_cmd, codex_cmd, gemini_cmd):
        module.register(sub)
    secrets_cmd.register(sub)
    auth_cmd.register(sub)
    doctor_cmd.register(sub)
    demo = sub.add_parser("demo-server", help="the bundled demo MCP server, on stdio (it is in the default config)")
    demo.set_defaults(func=_demo_server)
    return top


def _demo_server(_args: argparse.Namespace) -> int:
    from mcpx.demo.mcp_server import main as demo_main

    return demo_main()


def main(argv: list[str] | None = None) -> int:
    top = parser()
    if not (sys.argv[1:] if argv is None else argv):
        top.print_help(sys.stderr)  # `mcpx` alone: what it can do, not only that a command is missing
        return 2
    args = top.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # the reader went away (`mcpx status | head`): that is its choice, not our failure, and no traceback.
        # Point stdout at /dev/null so the interpreter's own flush at exit does not raise it again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a process ended by SIGPIPE (128 + 13)


if __name__ == "__main__":
    sys.exit(main())
