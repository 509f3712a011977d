"""`mcpx codex import [--scope project|user]`: the MCP servers already in Codex's config, moved behind mcpx.

It reads the `[mcp_servers.NAME]` tables of the scope's config.toml (cli/hosts/codex_files.py), moves each one mcpx
can run as Codex does into mcpx's config ($MCPX_CONFIG, else the project's .mcpx/config.json; with --scope user, mcpx's
user config), takes its table out of Codex's file (every comment and other table stays), and installs mcpx in the same
scope (cli/hosts/codex_install.py). The moving itself is cli/hosts/server_import.py's, as for opencode and Claude Code.

Codex starts a stdio server with a fixed few variables (HOME, PATH, LANG, …) plus its `env` and the variables its
`env_vars` names; mcpx with a safe set plus its `env`: so `env` moves as it is and each `env_vars` name becomes a
`"NAME": "${NAME}"` pass-through. Nothing is passed by a name that looks like the server's, since Codex passed
nothing of the kind.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mcpx.cli.hosts.codex_files import DOC, MCP_KEY, CodexPlace, plain, read_toml, write_toml
from mcpx.cli.hosts.codex_install import ENTRY, TOOL_PREFIX, apply
from mcpx.cli.hosts.host_cmd import imported
from mcpx.cli.hosts.host_entry import is_mcpx_entry
from mcpx.cli.hosts.host_files import import_target
from mcpx.cli.hosts.server_import import Unimportable, move
from mcpx.config.environment import references

# the keys of a Codex entry that only tune how Codex itself uses the server: mcpx has its own ways, or none
_CODEX_ONLY = {"startup_timeout_sec", "tool_timeout_sec", "required", "default_tools_approval_mode",
               "supports_parallel_tool_calls", "startup_readiness", "tool_input_schema_max_bytes"}


def imported_entry(entry: Any) -> tuple[Any, list[str]]:
    """A Codex entry as mcpx's config takes it, so the server gets what it got from Codex; and what it passes
    through."""
    if not isinstance(entry, dict):
        return entry, []
    if entry.get("enabled") is False:
        raise Unimportable("it is turned off in Codex (enabled = false)")
    for key in ("enabled_tools", "disabled_tools", "tools"):
        if key in entry:
            raise Unimportable(f"Codex limits or tunes its tools ({key}), and mcpx would offer them all; move it by "
                               "hand")
    rest = {k: v for k, v in entry.items() if k not in _CODEX_ONLY and k != "enabled"}
    if "url" in rest:
        if any(k in rest for k in ("bearer_token_env_var", "env_http_headers", "oauth", "scopes")):
            raise Unimportable("Codex reads its credentials from variables or signs in itself, and mcpx fills "
                               "${NAME} in a server's env only; move it by hand")
        out: dict[str, Any] = {"type": "http", "url": rest.pop("url")}
        if headers := rest.pop("http_headers", None):
            out["headers"] = dict(headers)
        return {**rest, **out}, []
    env = {str(k): str(v) for k, v in (rest.pop("env", None) or {}).items()}
    for name in rest.pop("env_vars", None) or []:
        if not isinstance(name, str):
            raise Unimportable(f"its env_vars has {name!r}, which is not a variable's name; move it by hand")
        env.setdefault(name, "${" + name + "}")
    out = {**rest, **({"env": env} if env else {})}
    return out, sorted({ref for value in env.values() for ref in references(value)})


def import_servers(args: argparse.Namespace) -> int:
    cwd = Path.cwd().resolve()
    place = CodexPlace.of(args.scope, cwd)
    doc = read_toml(place.config)  # read first: a file that does not parse is refused before anything is written
    servers = doc.get(MCP_KEY)
    tables: dict[str, Any] = servers if isinstance(servers, dict) else {}
    candidates = {name: plain(entry) for name, entry in tables.items()
                  if name != ENTRY and not is_mcpx_entry(plain(entry))}
    origin = dict.fromkeys(candidates, place.config)
    target = import_target(args.scope, cwd)
    report = move("Codex", candidates, lambda _name, entry: imported_entry(entry), origin, target, DOC)
    if report.moved:
        for name in report.moved:
            del tables[name]
        write_toml(place.config, doc)
    installed = apply(place) if report.moved else None
    return imported(args, "Codex", place.config, candidates, report, target, installed, TOOL_PREFIX,
                    saw="a few of yours (HOME, PATH, the locale, …) and those its env_vars named")
