"""`mcpx opencode install|import|plugin-dir`: mcpx in opencode (docs/opencode.md).

`install` (cli/hosts/opencode_install.py) puts the MCP entry that runs `mcpx serve`, the plugin's two parts and the
skill where opencode finds them. `import` moves the MCP servers already in opencode's config behind mcpx (into
mcpx's config), so their questions reach the right party. `plugin-dir` prints where this mcpx's plugin is: the
entry points install writes load it from there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from mcpx.cli.common import add_json_flag, emit_json
from mcpx.cli.hosts.host_files import guarded, mcpx_config
from mcpx.cli.hosts.opencode_files import opencode_config, read_json, write_json
from mcpx.cli.hosts.opencode_install import DEFAULT_ENTRY, install, is_mcpx_entry
from mcpx.cli.hosts.server_import import Unimportable, move, namesakes, tell
from mcpx.system.assets import missing_hint, plugin_dir

# ---- the commands


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    oc = sub.add_parser("opencode", help="mcpx in opencode: install the MCP entry, plugin and skill; import servers")
    osub = oc.add_subparsers(dest="opencode_cmd", required=True, metavar="COMMAND")

    p = osub.add_parser("install", help="add mcpx serve, the plugin and the skill to opencode's config: opencode.json "
                      "and tui.json of this project (or --global)")
    p.add_argument("--global", dest="global_", action="store_true",
                   help="opencode's global config ($OPENCODE_CONFIG_DIR, else ~/.config/opencode/opencode.json)")
    p.add_argument("--uninstall", action="store_true", help="remove exactly what install adds")
    p.add_argument("--entry", default=DEFAULT_ENTRY, metavar="NAME",
                   help="the MCP entry's name (default mcpx: tools reach the model as mcpx_SERVER_TOOL)")
    add_json_flag(p)
    p.set_defaults(func=guarded("opencode", install))

    p = osub.add_parser("plugin-dir", help="where this mcpx's opencode plugin is (the entry points install writes "
                                           "load it from there)")
    p.set_defaults(func=plugin_dir_cmd)

    p = osub.add_parser("import", help="move the MCP servers in opencode.json behind mcpx (into mcpx's config)")
    p.add_argument("--global", dest="global_", action="store_true", help="import from opencode's global config")
    p.add_argument("--entry", default=DEFAULT_ENTRY, metavar="NAME", help="mcpx's own MCP entry, which stays")
    add_json_flag(p)
    p.set_defaults(func=guarded("opencode", import_servers))


def plugin_dir_cmd(_args: argparse.Namespace) -> int:
    path = plugin_dir()
    if not (path / "index.js").is_file():
        print(f"mcpx: no opencode plugin at {path}: {missing_hint()}", file=sys.stderr)
        return 1
    print(path)
    return 0


_OPENCODE_ENV = re.compile(r"\{env:([^}]+)\}")
_OPENCODE_FILE = re.compile(r"\{file:[^}]+\}")


def imported_entry(name: str, entry: Any, environ: Mapping[str, str]) -> tuple[Any, list[str]]:
    """The entry as mcpx's config takes it, so the server gets what it needs; and what it passes through.

    opencode starts a local server with its own whole environment plus `environment`, and fills
    `{env:NAME}` (and `{file:…}`) anywhere in its config. mcpx gives a server a small safe set plus
    its `env` (config/environment.py), so: `{env:NAME}` in `environment` becomes `${NAME}`; a
    literal `${` is kept literal (`$${`); and a variable set here whose name starts with a word of the
    server's name (GITHUB_TOKEN for github, BRAVE_API_KEY for brave-search) is passed through by name.
    """
    if not isinstance(entry, dict):
        return entry, []
    text = json.dumps(entry)
    if _OPENCODE_FILE.search(text):
        raise Unimportable("it reads a file with {file:…}, which mcpx does not; put the value in its env (or "
                           "pass a variable with ${NAME}) and move it by hand")
    environment = entry.get("environment")
    outside = json.dumps({k: v for k, v in entry.items() if k != "environment"})
    if (m := _OPENCODE_ENV.search(outside)) is not None:
        raise Unimportable(f"it uses {m.group(0)} outside its environment, and mcpx fills ${{NAME}} only in a "
                           "server's env; move it by hand")
    if entry.get("type", "local") != "local" or "command" not in entry:
        return entry, []
    env: dict[str, str] = {}
    for var, value in (environment or {}).items():
        value = str(value).replace("${", "$${")  # opencode kept it literal; so does mcpx, written so
        env[var] = _OPENCODE_ENV.sub(lambda m: "${" + m.group(1).strip() + "}", value)
    env, passed = namesakes(name, env, environ)
    out = {k: v for k, v in entry.items() if k != "environment"}
    if env:
        out["environment"] = env
    return out, passed


def import_servers(args: argparse.Namespace) -> int:
    source = opencode_config(args.global_)
    target = mcpx_config()
    data = read_json(source)
    mcp: dict[str, Any] = found if isinstance(found := data.get("mcp"), dict) else {}
    candidates = {name: entry for name, entry in mcp.items() if name != args.entry and not is_mcpx_entry(entry)}
    origin = dict.fromkeys(candidates, source)
    report = move("opencode", candidates, lambda name, entry: imported_entry(name, entry, os.environ), origin,
                  target, "docs/opencode.md")
    if report.moved:
        left = {k: v for k, v in mcp.items() if k not in report.moved}
        out = {k: v for k, v in data.items() if k != "mcp"} if not left else {**data, "mcp": left}
        write_json(source, out)
    installed = is_mcpx_entry(mcp.get(args.entry))
    if args.json:
        emit_json({"action": "import", "from": str(source), "into": str(target), "moved": report.moved,
                   "skipped": report.skipped, "passed": report.passed, "mcpxInstalled": installed})
        return 0 if not report.skipped else 1
    if not candidates:
        print(f"mcpx: no MCP servers to import in {source}")
    tell("opencode", report, origin, target, lambda name: f"{args.entry}_{name}_TOOL")
    if report.moved and not installed:
        print("mcpx: opencode does not run mcpx yet: run `mcpx opencode install`" +
              (" --global" if args.global_ else ""))
    return 0 if not report.skipped else 1
