"""`mcpx gemini import [--scope project|user]`: the MCP servers already in Gemini CLI's settings, moved behind mcpx.

It reads the scope's settings.json `mcpServers` (cli/hosts/gemini_files.py), moves each one mcpx can run as Gemini
CLI does into mcpx's config ($MCPX_CONFIG, else the project's .mcpx/config.json; with --scope user, mcpx's user
config), takes it out of Gemini CLI's file (every other key stays), and installs mcpx in the same scope
(cli/hosts/gemini_install.py). The moving itself is cli/hosts/server_import.py's, as for opencode, Claude Code
and Codex.

Gemini CLI starts a stdio server with its own environment plus `env`, filling `$NAME` and `${NAME}` there; mcpx
fills `${NAME}` in `env` only, from a safe set: so `$NAME` is written `${NAME}`, and a variable named like the server
is passed through (server_import.namesakes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcpx.cli.hosts.gemini_files import DOC, MCP_KEY, GeminiPlace, read_json
from mcpx.cli.hosts.gemini_install import ENTRY, TOOL_PREFIX, apply
from mcpx.cli.hosts.host_cmd import imported
from mcpx.cli.hosts.host_entry import is_mcpx_entry
from mcpx.cli.hosts.host_files import import_target, write_json
from mcpx.cli.hosts.server_import import Unimportable, move, namesakes

_BARE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")  # $NAME, which Gemini CLI fills as it fills ${NAME}
_REF = re.compile(r"\$\{?[A-Za-z_]")
# the keys of a Gemini CLI entry that only tune how Gemini CLI itself uses the server
_GEMINI_ONLY = {"timeout", "trust", "description", "oauth", "authProviderType"}


def imported_entry(name: str, entry: Any, environ: Mapping[str, str]) -> tuple[Any, list[str]]:
    """A Gemini CLI entry as mcpx's config takes it; and what it passes through."""
    if not isinstance(entry, dict):
        return entry, []
    for key in ("includeTools", "excludeTools"):
        if key in entry:
            raise Unimportable(f"Gemini CLI limits its tools ({key}), and mcpx would offer them all; move it by hand")
    rest = {k: v for k, v in entry.items() if k not in _GEMINI_ONLY}
    if "httpUrl" in rest or rest.get("type") == "http":
        out: dict[str, Any] = {"type": "http", "url": rest.pop("httpUrl", None) or rest.pop("url", None)}
        rest.pop("type", None)
        if headers := rest.pop("headers", None):
            out["headers"] = headers
        if _REF.search(json.dumps(out)):
            raise Unimportable("it uses a variable in its url or headers, and mcpx fills ${NAME} in a server's env "
                               "only; move it by hand")
        return {**rest, **out}, []
    if "url" in rest:
        raise Unimportable("it speaks MCP's older HTTP+SSE transport (url), which mcpx does not; it stays in "
                           "Gemini CLI")
    if _REF.search(json.dumps({k: v for k, v in rest.items() if k != "env"})):
        raise Unimportable("it uses a variable outside its env, and mcpx fills ${NAME} in a server's env only; move "
                           "it by hand")
    env = {str(k): _BARE.sub(r"${\1}", str(v)) for k, v in (rest.pop("env", None) or {}).items()}
    env, passed = namesakes(name, env, environ)
    return {**rest, **({"env": env} if env else {})}, passed


def import_servers(args: argparse.Namespace) -> int:
    cwd = Path.cwd().resolve()
    place = GeminiPlace.of(args.scope, cwd)
    data = read_json(place.config)  # read first: a file that is refused leaves everything as it was
    found = data.get(MCP_KEY)
    servers: dict[str, Any] = found if isinstance(found, dict) else {}
    candidates = {name: e for name, e in servers.items() if name != ENTRY and not is_mcpx_entry(e)}
    origin = dict.fromkeys(candidates, place.config)
    target = import_target(args.scope, cwd)
    report = move("Gemini CLI", candidates, lambda name, entry: imported_entry(name, entry, os.environ), origin,
                  target, DOC)
    if report.moved:
        for name in report.moved:
            del servers[name]
        write_json(place.config, data)
    installed = apply(place) if report.moved else None
    return imported(args, "Gemini CLI", place.config, candidates, report, target, installed, TOOL_PREFIX)
