"""`mcpx`: the entry point. Each command group lives in its own module, imported only when one of its commands
runs: the table below gives `mcpx --help` every command's name and line without importing any."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from mcpx import __version__

EPILOG = """\
exit codes: 0 ok (accept) · 1 failed (decline) · 2 usage · 69 no daemon · 75 waits for input (cancel, expiry)
state: $MCPX_HOME (else $XDG_STATE_HOME/mcpx, else ~/.local/state/mcpx) · config: $MCPX_CONFIG, else
~/.config/mcpx/config.json under the nearest .mcpx/config.json"""


# Every command: the module that registers it, and the line `mcpx --help` gives it. `mcpx --help` (and any
# command) builds the parser from this table alone; only the module of the command that runs is imported, and it
# registers that command's full arguments. The lines are the modules' own, copied: tests/unit/test_cli_table.py
# checks that this table is what the modules register, in the same order.
COMMANDS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("mcpx.cli.daemon_cmd", (
        ("daemon", "run the daemon in the foreground (one per state directory); or start, stop or restart it in "
                   "the background"),
        ("status", "is the daemon running, what config, how many questions wait, which upstream instances run and "
                   "the memory they hold"))),
    ("mcpx.cli.serve_cmd", (
        ("serve", "the MCP surface on stdio (for opencode and other MCP hosts); starts a daemon if none runs"),)),
    ("mcpx.cli.elicit_cmd", (("elicit", "questions waiting for an answer: list, show, answer, watch, ask"),)),
    ("mcpx.cli.tui_cmd", (("tui", "the terminal inbox: pending questions, live; Enter opens one, a/d/c answer it"),)),
    ("mcpx.cli.inbox_cmd", (
        ("inbox", "open the web inbox in your browser, signed in (--print: print its address)"),)),
    ("mcpx.cli.person_cmd", (("person", "people's passkeys: enroll, list, revoke (docs/presence.md)"),)),
    ("mcpx.cli.call_cmd", (
        ("call", "call an upstream tool; questions it asks are prompted for or returned (exit 75)"),
        ("task", "calls running in the daemon"),
        ("tools", "what is behind mcpx: each server's tools, or one tool's arguments"))),
    ("mcpx.cli.audit_cmd", (
        ("audit", "audit records: who opened, answered, expired or abandoned what, and when"),)),
    ("mcpx.cli.policy_cmd", (
        ("policy", "what routing and elicit.rules would do with a question"),
        ("config", "mcpx's configuration"))),
    ("mcpx.cli.hosts.opencode_cmd", (
        ("opencode", "mcpx in opencode: install the MCP entry, plugin and skill; import servers"),)),
    ("mcpx.cli.hosts.claude_cmd", (
        ("claude", "mcpx in Claude Code: install the MCP entry, hook and skill; import servers; its Elicitation "
                   "hook"),)),
    ("mcpx.cli.hosts.codex_cmd", (
        ("codex", "mcpx in Codex CLI: install the MCP entry and the skill; import its servers"),)),
    ("mcpx.cli.hosts.gemini_cmd", (
        ("gemini", "mcpx in Gemini CLI: install the MCP entry and the skill; import its servers"),)),
    ("mcpx.cli.secrets_cmd", (
        ("secrets", "servers' secrets in the OS keychain: list, set, forget (never shown)"),)),
    ("mcpx.cli.auth_cmd", (("auth", "logins to HTTP servers (OAuth): list, login, logout, complete"),)),
    ("mcpx.cli.doctor_cmd", (
        ("doctor", "check the config, the daemon, the store, every server and the hosts; name each problem and "
                   "what to do (exit 1)"),)),
)
DEMO_HELP = "the bundled demo MCP server, on stdio (it is in the default config)"


def parser(argv: Sequence[str] = (), *, every: bool = False) -> argparse.ArgumentParser:
    """mcpx's parser. The command `argv` names gets its full arguments (its module is imported and registers it);
    every other command only its name and help line, which is all `mcpx --help` and a wrong command's error show.
    `every`: each command in full (every module imported)."""
    chosen = next((word for word in argv if not word.startswith("-")), None)
    # the other commands' lines are for the top level's help (`mcpx`, `mcpx -h elicit`) and its error naming an
    # unknown command: a command that runs needs none of them (each is a parser of argparse's own to build)
    lines = every or chosen is None or not any(chosen == name for _, cmds in COMMANDS for name, _ in cmds) or any(
        word in ("-h", "--help") for word in argv[:list(argv).index(chosen)])
    top = argparse.ArgumentParser(
        prog="mcpx", description="An MCP gateway whose questions are durable state with a deadline.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"mcpx {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module, commands in COMMANDS:
        if every or any(name == chosen for name, _ in commands):
            importlib.import_module(module).register(sub)
        elif lines:
            for name, help_text in commands:
                sub.add_parser(name, help=help_text)
    demo = sub.add_parser("demo-server", help=DEMO_HELP)
    demo.set_defaults(func=_demo_server)
    return top


def _demo_server(_args: argparse.Namespace) -> int:
    from mcpx.demo.mcp_server import main as demo_main

    return demo_main()


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    top = parser(words)
    if not words:
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
