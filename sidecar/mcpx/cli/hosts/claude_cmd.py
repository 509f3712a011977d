"""`mcpx claude …`: mcpx in Claude Code (docs/claude-code.md).

`install` (cli/hosts/claude_install.py) puts the MCP entry that runs `mcpx serve`, the Elicitation hook and the skill
where Claude Code finds them, for a project or for the user. `import` (cli/hosts/claude_import.py) moves the MCP
servers already in Claude Code's config behind mcpx. `hook` is the Elicitation hook Claude Code runs
(cli/hosts/claude_hook.py).
"""

from __future__ import annotations

import argparse

from mcpx.cli.common import add_json_flag
from mcpx.cli.hosts.host_files import guarded

SCOPES = ("project", "user")


# each subcommand's module is imported when it runs: the hook, which Claude Code runs for every question, loads
# neither the installer nor the importer (nor the config's models under it)
def install(args: argparse.Namespace) -> int:
    from mcpx.cli.hosts.claude_install import install as run

    return run(args)


def import_servers(args: argparse.Namespace) -> int:
    from mcpx.cli.hosts.claude_import import import_servers as run

    return run(args)


def hook(args: argparse.Namespace) -> int:
    from mcpx.cli.hosts.claude_hook import main as run

    return run(args)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cc = sub.add_parser("claude", help="mcpx in Claude Code: install the MCP entry, hook and skill; import servers; "
                        "its Elicitation hook")
    csub = cc.add_subparsers(dest="claude_cmd", required=True, metavar="COMMAND")

    p = csub.add_parser("install", help="add mcpx serve, its Elicitation hook and the skill to Claude Code: this "
                        "project's .mcp.json and .claude/ (or --scope user: ~/.claude.json and ~/.claude/)")
    p.add_argument("--scope", choices=SCOPES, default="project",
                   help="project (default): this project's files; user: yours, for every project "
                        "($CLAUDE_CONFIG_DIR when set)")
    p.add_argument("--uninstall", action="store_true", help="remove exactly what install adds")
    add_json_flag(p)
    p.set_defaults(func=guarded("claude", install))

    p = csub.add_parser("import", help="move the MCP servers in Claude Code's config behind mcpx (into mcpx's "
                        "config), and install mcpx in their place")
    p.add_argument("--scope", choices=SCOPES, default="project",
                   help="project (default): .mcp.json and your local servers of this project; user: ~/.claude.json's")
    add_json_flag(p)
    p.set_defaults(func=guarded("claude", import_servers))

    p = csub.add_parser("hook", help="Claude Code's Elicitation hook: reads the question on stdin; unattended "
                        "(claude -p), waits in mcpx for the person's answer and prints it")
    p.set_defaults(func=hook)
