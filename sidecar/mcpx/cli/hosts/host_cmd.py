"""`mcpx HOST install` and `mcpx HOST import`, alike for every host mcpx installs into (Claude Code, Codex, Gemini
CLI): the same arguments, the same flow and words; what each writes is its own module's (cli/hosts/claude_install.py,
cli/hosts/codex_install.py, cli/hosts/gemini_install.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from mcpx.cli.common import add_json_flag, emit_json
from mcpx.cli.hosts.host_files import guarded
from mcpx.cli.hosts.server_import import ImportReport, tell

SCOPES = ("project", "user")
Command = Callable[[argparse.Namespace], int]
P = TypeVar("P")


def register_host(sub: argparse._SubParsersAction[argparse.ArgumentParser], host: str, label: str, *,
                  install: Command, import_servers: Command, project: str, user: str) -> None:
    """`mcpx HOST install` and `mcpx HOST import`; `project` and `user` say where each scope writes."""
    top = sub.add_parser(host, help=f"mcpx in {label}: install the MCP entry and the skill; import its servers")
    hsub = top.add_subparsers(dest=f"{host}_cmd", required=True, metavar="COMMAND")
    p = hsub.add_parser("install", help=f"add mcpx serve and the mcpx-elicitation skill to {label}: {project} (or "
                        f"--scope user: {user})")
    p.add_argument("--scope", choices=SCOPES, default="project",
                   help=f"project (default): {project}; user: {user}, for every project")
    p.add_argument("--uninstall", action="store_true", help="remove exactly what install adds")
    add_json_flag(p)
    p.set_defaults(func=guarded(host, install))
    p = hsub.add_parser("import", help=f"move the MCP servers in {label}'s config behind mcpx (into mcpx's config), "
                        "and install mcpx in their place")
    p.add_argument("--scope", choices=SCOPES, default="project", help=f"project (default): {project}; user: {user}")
    add_json_flag(p)
    p.set_defaults(func=guarded(host, import_servers))


class Install(Protocol):
    """What one install did: its report (--json) and its words for a person."""

    def report(self) -> dict[str, Any]: ...

    def tell(self) -> None: ...


def installer(place_of: Callable[[Any], P], apply: Callable[[P], Install],
              uninstall: Callable[[argparse.Namespace, P], int]) -> Command:
    """`mcpx HOST install [--scope S] [--uninstall] [--json]`, from where a scope writes and what installs there and
    what undoes it."""
    def install(args: argparse.Namespace) -> int:
        place = place_of(args.scope)
        if args.uninstall:
            return uninstall(args, place)
        done = apply(place)
        if args.json:
            emit_json(done.report())
        else:
            done.tell()
        return 0
    return install


def undone(args: argparse.Namespace, label: str, scope: str, root: Path, entry: str, files: list[str],
           deleted: list[str]) -> int:
    """What `--uninstall` took away (`files`, shown; `deleted`, the files it left empty and removed), said."""
    if args.json:
        emit_json({"action": "uninstall", "scope": scope, "root": str(root), "changed": bool(files), "files": files,
                   "deleted": deleted})
    elif not files:
        print(f"mcpx: nothing of mcpx's for {label} ({scope} scope, {root}); nothing changed")
    else:
        print(f"mcpx: removed {entry} and the skill from {label} ({', '.join(files)})"
              + (f"; {', '.join(deleted)} left empty, and removed" if deleted else ""))
    return 0


def imported(args: argparse.Namespace, label: str, source: Path, candidates: dict[str, Any], report: ImportReport,
             target: Path, installed: Install | None, tool_prefix: str, saw: str = "all of yours") -> int:
    """What `mcpx HOST import` did from one file of the host's, said; exit 1 when a server was left there."""
    origin = dict.fromkeys(candidates, source)
    if args.json:
        emit_json({"action": "import", "scope": args.scope, "from": str(source), "into": str(target),
                   "moved": report.moved, "skipped": report.skipped, "passed": report.passed,
                   "install": installed.report() if installed else None})
        return 1 if report.skipped else 0
    if not candidates:
        print(f"mcpx: no MCP servers to import in {source}")
    tell(label, report, origin, target, lambda name: f"{tool_prefix}{name}_TOOL", saw)
    if installed is not None:
        installed.tell()
    return 1 if report.skipped else 0
