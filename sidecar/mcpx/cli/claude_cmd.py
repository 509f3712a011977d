"""`mcpx claude …`: mcpx in Claude Code (docs/claude-code.md).

`hook` is the Elicitation hook Claude Code runs (cli/claude_hook.py).
"""

from __future__ import annotations

import argparse

from mcpx.cli import claude_hook


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cc = sub.add_parser("claude", help="mcpx in Claude Code: its Elicitation hook")
    csub = cc.add_subparsers(dest="claude_cmd", required=True, metavar="COMMAND")
    p = csub.add_parser("hook", help="Claude Code's Elicitation hook: reads the question on stdin; unattended "
                        "(claude -p), waits in mcpx for the person's answer and prints it")
    p.set_defaults(func=claude_hook.main)
