"""`mcpx claude hook`: Claude Code's `Elicitation` hook (docs/claude-code.md).

Claude Code runs it with the question it was passed as JSON on stdin. In its TUI it prints nothing, and Claude
Code draws its own form. In print mode (`claude -p`), which cancels every question by itself, it finds the same
question in mcpx, tells the person where it waits, and prints their answer when it comes.
"""

from __future__ import annotations

import argparse


def main(args: argparse.Namespace) -> int:
    """Stub: the hook says nothing, and Claude Code does what it does without it."""
    return 0
