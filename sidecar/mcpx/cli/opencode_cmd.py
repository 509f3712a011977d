"""`mcpx opencode install|import|plugin-dir`: mcpx in opencode (docs/opencode.md).

`install` (cli/opencode_install.py) puts the MCP entry that runs `mcpx serve`, the plugin's two parts and the
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpx.assets import missing_hint, plugin_dir
from mcpx.cli.common import add_json_flag, emit_json
from mcpx.cli.opencode_files import OpencodeError, opencode_config, read_json, write_json
from mcpx.cli.opencode_install import DEFAULT_ENTRY, install, is_mcpx_entry
from mcpx.errors import McpxError
from mcpx.upstream.environment import INHERITED, references
from mcpx.upstream.environment import inherited as environment_inherited


def mcpx_config(cwd: Path | None = None) -> Path:
    if explicit := os.environ.get("MCPX_CONFIG"):
        return Path(explicit).expanduser()
    return (cwd or Path.cwd()).resolve() / ".mcpx" / "config.json"


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
    p.set_defaults(func=_guard(install))

    p = osub.add_parser("plugin-dir", help="where this mcpx's opencode plugin is (the entry points install writes "
                                           "load it from there)")
    p.set_defaults(func=plugin_dir_cmd)

    p = osub.add_parser("import", help="move the MCP servers in opencode.json behind mcpx (into mcpx's config)")
    p.add_argument("--global", dest="global_", action="store_true", help="import from opencode's global config")
    p.add_argument("--entry", default=DEFAULT_ENTRY, metavar="NAME", help="mcpx's own MCP entry, which stays")
    add_json_flag(p)
    p.set_defaults(func=_guard(import_servers))


def plugin_dir_cmd(_args: argparse.Namespace) -> int:
    path = plugin_dir()
    if not (path / "index.js").is_file():
        print(f"mcpx: no opencode plugin at {path}: {missing_hint()}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _guard(body: Any) -> Any:
    def runner(args: argparse.Namespace) -> int:
        try:
            return int(body(args))
        except OpencodeError as exc:
            if args.json:
                emit_json({"error": {"code": "opencode_config", "message": str(exc)}})
            else:
                print(f"mcpx opencode: {exc}", file=sys.stderr)
            return 1
    return runner


@dataclass
class ImportReport:
    moved: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    passed: dict[str, list[str]] = field(default_factory=dict)  # server → variables its env passes through


class Unimportable(McpxError):
    """An entry mcpx cannot run as opencode does; the message says why and what to do."""


_OPENCODE_ENV = re.compile(r"\{env:([^}]+)\}")
_OPENCODE_FILE = re.compile(r"\{file:[^}]+\}")
_GENERIC = {"mcp", "mcpx", "opencode", "server", "servers", "local", "remote", "the", "api", "app"}


def _name_words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", name.lower()) if len(w) >= 3 and w not in _GENERIC}


def imported_entry(name: str, entry: Any, environ: Mapping[str, str]) -> tuple[Any, list[str]]:
    """The entry as mcpx's config takes it, so the server gets what it needs; and what it passes through.

    opencode starts a local server with its own whole environment plus `environment`, and fills
    `{env:NAME}` (and `{file:…}`) anywhere in its config. mcpx gives a server a small safe set plus
    its `env` (upstream/environment.py), so: `{env:NAME}` in `environment` becomes `${NAME}`; a
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
    words = _name_words(name)
    inherited = set(environment_inherited(environ))
    for var in sorted(environ):
        if var not in env and var not in inherited and var.split("_", 1)[0].lower() in words:
            env[var] = "${" + var + "}"
    passed = sorted({ref for value in env.values() for ref in references(value)})
    out = {k: v for k, v in entry.items() if k != "environment"}
    if env:
        out["environment"] = env
    return out, passed


def _unrunnable(name: str, entry: Any, origin: str) -> str | None:
    """Why mcpx could not run this opencode entry, in the words of the shape it has (local or remote)."""
    from mcpx.config import ConfigError, validate

    try:
        validate({"servers": {name: entry}}, origin)
        return None
    except ConfigError as exc:
        return exc.problem + (f" ({exc.field})" if exc.field else "")


def import_servers(args: argparse.Namespace) -> int:
    from mcpx.config import data_servers

    source = opencode_config(args.global_)
    target = mcpx_config()
    data = read_json(source)
    mcp: dict[str, Any] = found if isinstance(found := data.get("mcp"), dict) else {}
    candidates = {name: entry for name, entry in mcp.items() if name != args.entry and not is_mcpx_entry(entry)}
    config = read_json(target)
    existing = data_servers(config)
    report = ImportReport()
    servers = dict(config.get("servers") or {})
    for name, original in candidates.items():
        try:
            entry, passed = imported_entry(name, original, os.environ)
        except Unimportable as exc:
            report.skipped[name] = f"mcpx cannot run it as opencode does: {exc}"
            continue
        if name in existing:
            if existing[name] in (entry, original):
                report.moved.append(name)  # already behind mcpx, as it is here
            else:
                report.skipped[name] = f"mcpx's config ({target}) already has a different server named {name!r}"
            continue
        if (problem := _unrunnable(name, entry, str(source))) is not None:
            report.skipped[name] = f"mcpx cannot run it as it is: {problem}"
            continue
        servers[name] = entry
        report.moved.append(name)
        if isinstance(entry, dict) and "command" in entry:
            report.passed[name] = passed
    if report.moved:
        if servers != (config.get("servers") or {}):
            write_json(target, {**config, "servers": servers})
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
    for name in report.moved:
        print(f"mcpx: moved {name!r} from {source} into {target}; its tools now reach the model as "
              f"{args.entry}_{name}_TOOL")
        if name in report.passed:
            names = ", ".join(report.passed[name]) or "nothing else"
            print(f"  it gets {', '.join(INHERITED[:6])}, the locale and its environment entries, passing through "
                  f"{names} from the daemon's environment; under opencode it saw all of yours — if it needs "
                  f'another variable, add "NAME": "${{NAME}}" to its env in {target}')
    for name, why in report.skipped.items():
        print(f"mcpx: left {name!r} in {source}: {why}", file=sys.stderr)
    if report.moved and not installed:
        print("mcpx: opencode does not run mcpx yet: run `mcpx opencode install`" +
              (" --global" if args.global_ else ""))
    return 0 if not report.skipped else 1
