"""`mcpx claude import [--scope project|user]`: the MCP servers already in Claude Code's config, moved behind mcpx.

Project scope takes the project's `.mcp.json` servers and this person's "local" ones for the project
(`~/.claude.json` projects[DIR].mcpServers), into $MCPX_CONFIG, else the project's `.mcpx/config.json`; user scope
takes `~/.claude.json`'s own `mcpServers`, servers for every project, into $MCPX_CONFIG, else mcpx's user config
(~/.config/mcpx/config.json). Each moved server leaves Claude Code's file (every other key stays), and mcpx is
installed in the same scope (cli/hosts/claude_install.py), so its tools reach the model as mcp__mcpx__SERVER_TOOL.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcpx.cli.common import emit_json
from mcpx.cli.hosts.claude_files import DOC, MCP_KEY, ClaudePlace, project_key, read_json, user_file
from mcpx.cli.hosts.claude_install import ENTRY, TOOL_PREFIX, apply, is_mcpx_entry
from mcpx.cli.hosts.host_files import import_target, write_json
from mcpx.cli.hosts.server_import import Unimportable, move, namesakes, tell

# Claude Code fills ${NAME} and ${NAME:-default} in an entry's command, args, env, url and headers; mcpx fills
# ${NAME} in a server's env only, and reads $${ as a literal ${
_CLAUDE_REF = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def imported_entry(name: str, entry: Any, environ: Mapping[str, str]) -> tuple[Any, list[str]]:
    """The entry as mcpx's config takes it, so the server gets what it got from Claude Code; and what it passes
    through. Claude Code starts a stdio server with its own whole environment plus `env`; mcpx with a small safe set
    plus `env`, so a variable set here that is named like the server is passed through by name."""
    if not isinstance(entry, dict):
        return entry, []
    kind = entry.get("type", "stdio")
    if kind == "sse":
        raise Unimportable("it speaks MCP's older HTTP+SSE transport (2024-11-05), which mcpx does not; it stays "
                           "in Claude Code")
    if kind not in ("stdio", "http"):
        raise Unimportable(f"its type {kind!r} is not one mcpx runs (stdio or http)")
    outside = json.dumps({k: v for k, v in entry.items() if k != "env"})
    if (m := _CLAUDE_REF.search(outside)) is not None:
        raise Unimportable(f"it uses {m.group(0)} outside its env, and mcpx fills ${{NAME}} only in a server's env; "
                           "move it by hand")
    if kind != "stdio":
        return entry, []
    env: dict[str, str] = {}
    for var, value in (entry.get("env") or {}).items():
        value = str(value)
        if "$${" in value or any(not _NAME.fullmatch(m.group(1)) for m in _CLAUDE_REF.finditer(value)):
            raise Unimportable(f"its env {var} is {value!r}: Claude Code fills that otherwise than mcpx, which fills "
                               "${NAME} alone (no :-default) and reads $${ as a literal ${; move it by hand")
        env[var] = value  # ${NAME}: the same in both
    env, passed = namesakes(name, env, environ)
    out = {k: v for k, v in entry.items() if k != "env"}
    if env:
        out["env"] = env
    return out, passed


def _sources(place: ClaudePlace, cwd: Path) -> list[tuple[Path, list[str]]]:
    """The files and the keys to the `mcpServers` objects import reads, the one Claude Code prefers first."""
    if place.scope == "user":
        return [(user_file(), [MCP_KEY])]
    return [(user_file(), ["projects", project_key(cwd), MCP_KEY]), (place.mcp, [MCP_KEY])]


def _servers(data: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    node: Any = data
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def import_servers(args: argparse.Namespace) -> int:
    cwd = Path.cwd().resolve()
    place = ClaudePlace.of(args.scope, cwd)
    sources = _sources(place, cwd)
    data = {path: read_json(path) for path, _ in sources}  # every file read first: one refused, none written
    target = import_target(args.scope, cwd)
    candidates: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    shadowed: dict[str, tuple[Path, str]] = {}  # a server of the same name as one Claude Code prefers
    for path, keys in sources:
        for name, entry in _servers(data[path], keys).items():
            if name == ENTRY or is_mcpx_entry(entry):
                continue
            if name in candidates:
                shadowed[name] = (path, f"Claude Code uses the {name!r} of {origin[name]} instead, which is the one "
                                        "import moves")
                continue
            candidates[name], origin[name] = entry, path
    report = move("Claude Code", candidates, lambda name, entry: imported_entry(name, entry, os.environ), origin,
                  target, DOC)
    for path, keys in sources:
        servers = _servers(data[path], keys)
        gone = [name for name in report.moved if origin[name] == path]
        if gone:
            for name in gone:
                del servers[name]
            write_json(path, data[path])
    installed = apply(place) if report.moved else None
    if args.json:
        emit_json({"action": "import", "scope": args.scope, "from": sorted({str(p) for p in origin.values()}),
                   "into": str(target), "moved": report.moved, "skipped": report.skipped,
                   "shadowed": {name: why for name, (_, why) in shadowed.items()},
                   "passed": report.passed, "install": installed.report() if installed else None})
        return 0 if not (report.skipped or shadowed) else 1
    if not candidates:
        print(f"mcpx: no MCP servers to import in {' or '.join(str(p) for p, _ in sources)}")
    tell("Claude Code", report, origin, target, lambda name: f"{TOOL_PREFIX}{name}_TOOL")
    for name, (path, why) in shadowed.items():
        print(f"mcpx: left {name!r} in {path}: {why}", file=sys.stderr)
    if installed is not None:
        installed.tell()
    return 0 if not (report.skipped or shadowed) else 1
