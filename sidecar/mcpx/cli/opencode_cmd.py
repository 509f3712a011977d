"""`mcpx opencode install|import`: mcpx, its plugin and its skill in opencode's config (docs/opencode.md).

`install` merges three things into opencode's config, keeping every other setting: the MCP entry that
runs `mcpx serve`, the plugin (plugin/opencode/dist), and the skill (skills/mcpx-elicitation, by
`skills.paths`). Running it twice changes nothing; `--uninstall` removes exactly those three.
`import` moves the MCP servers already in opencode's config behind mcpx (into mcpx's config), so
their questions reach the right party.

opencode's config files are written as plain JSON. A file with comments is refused rather than
rewritten without them.
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

from mcpx import jsonc
from mcpx.assets import missing_hint, plugin_file, skill_dir
from mcpx.cli.common import add_json_flag, emit_json
from mcpx.upstream.environment import INHERITED, references
from mcpx.upstream.environment import inherited as environment_inherited

SCHEMA_URL = "https://opencode.ai/config.json"
DEFAULT_ENTRY = "mcpx"


class OpencodeError(Exception):
    """Something the person must fix; the message names the file and what to do."""


# ---- where things are


def serve_command() -> list[str]:
    """`mcpx serve` from this very installation: its console script, else this Python with -m mcpx."""
    script = Path(sys.executable).parent / "mcpx"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "serve"]
    return [sys.executable, "-m", "mcpx", "serve"]


def global_config_dir() -> Path:
    """opencode's own config directory: OPENCODE_CONFIG_DIR when set (opencode loads it for every project),
    else $XDG_CONFIG_HOME/opencode, else ~/.config/opencode."""
    if explicit := os.environ.get("OPENCODE_CONFIG_DIR"):
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".config") / "opencode"


def opencode_config(global_: bool, cwd: Path | None = None) -> Path:
    """The file opencode's own `opencode mcp add` would edit: the first that exists, else opencode.json."""
    if global_:
        base = global_config_dir()
        candidates = [base / "opencode.json", base / "opencode.jsonc"]
    else:
        base = (cwd or Path.cwd()).resolve()
        candidates = [base / "opencode.json", base / "opencode.jsonc", base / ".opencode" / "opencode.json",
                      base / ".opencode" / "opencode.jsonc"]
    return next((c for c in candidates if c.is_file()), candidates[0])


def mcpx_config(cwd: Path | None = None) -> Path:
    if explicit := os.environ.get("MCPX_CONFIG"):
        return Path(explicit).expanduser()
    return (cwd or Path.cwd()).resolve() / ".mcpx" / "config.json"


# ---- reading and writing comment-free JSON


def read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            jsonc.loads(text)
        except (ValueError, json.JSONDecodeError) as exc:
            raise OpencodeError(f"{path}: not valid JSON ({exc}); fix it first") from None
        raise OpencodeError(f"{path} has comments or trailing commas; mcpx writes plain JSON and would lose them. "
                            "Remove them, or add the entries by hand (see docs/opencode.md)") from None
    if not isinstance(data, dict):
        raise OpencodeError(f"{path}: the top level must be a JSON object")
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ---- what install adds


def is_mcpx_entry(entry: Any) -> bool:
    """An MCP entry that runs `mcpx serve` (as install writes it, from any installation)."""
    if not isinstance(entry, dict) or entry.get("type", "local") != "local":
        return False
    command = entry.get("command")
    if not isinstance(command, list) or len(command) < 2 or command[-1] != "serve":
        return False
    head = [str(c) for c in command[:-1]]
    return Path(head[0]).name == "mcpx" or head[-2:] == ["-m", "mcpx"]


def _plugin_spec_of(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, list) and item and isinstance(item[0], str):
        return item[0]
    return None


@dataclass
class Wanted:
    entry: str
    command: list[str]
    plugin: str
    skill: str

    @property
    def mcp(self) -> dict[str, Any]:
        # MCPX_TOOL_PREFIX: opencode shows mcpx's tools as <entry>_<tool>, and mcpx's texts name them so
        return {"type": "local", "command": self.command, "enabled": True,
                "environment": {"MCPX_TOOL_PREFIX": f"{self.entry}_"}}

    @property
    def plugin_item(self) -> Any:
        return self.plugin if self.entry == DEFAULT_ENTRY else [self.plugin, {"entry": self.entry}]


def wanted(entry: str) -> Wanted:
    return Wanted(entry, serve_command(), plugin_file().as_uri(), str(skill_dir()))


def merged(data: dict[str, Any], want: Wanted) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(data))  # a deep copy, keys in their order
    if not out:
        out["$schema"] = SCHEMA_URL
    mcp = out.get("mcp")
    if mcp is None:
        mcp = out["mcp"] = {}
    elif not isinstance(mcp, dict):
        raise OpencodeError("'mcp' in opencode's config is not an object; fix it first")
    mcp[want.entry] = want.mcp
    plugins = out.get("plugin")
    if plugins is None:
        plugins = out["plugin"] = []
    elif not isinstance(plugins, list):
        raise OpencodeError("'plugin' in opencode's config is not a list; fix it first")
    ours = [p for p in plugins if _plugin_spec_of(p) == want.plugin]
    if ours != [want.plugin_item]:  # missing, with other options, or twice: once, as wanted, at the end
        out["plugin"] = [p for p in plugins if _plugin_spec_of(p) != want.plugin] + [want.plugin_item]
    skills = out.get("skills")
    if skills is None:
        skills = out["skills"] = {}
    elif not isinstance(skills, dict):
        raise OpencodeError("'skills' in opencode's config is not an object; fix it first")
    paths = skills.get("paths")
    if paths is None:
        paths = skills["paths"] = []
    elif not isinstance(paths, list):
        raise OpencodeError("'skills.paths' in opencode's config is not a list; fix it first")
    if want.skill not in paths:
        paths.append(want.skill)
    return out


def removed(data: dict[str, Any], want: Wanted) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = json.loads(json.dumps(data))
    gone: list[str] = []
    mcp = out.get("mcp")
    if isinstance(mcp, dict) and is_mcpx_entry(mcp.get(want.entry)):
        del mcp[want.entry]
        gone.append(f"mcp.{want.entry}")
        if not mcp:
            del out["mcp"]
    plugins = out.get("plugin")
    if isinstance(plugins, list):
        kept = [p for p in plugins if _plugin_spec_of(p) != want.plugin]
        if len(kept) != len(plugins):
            gone.append("plugin")
            if kept:
                out["plugin"] = kept
            else:
                del out["plugin"]
    skills = out.get("skills")
    if isinstance(skills, dict) and isinstance(skills.get("paths"), list) and want.skill in skills["paths"]:
        skills["paths"] = [p for p in skills["paths"] if p != want.skill]
        gone.append("skills.paths")
        if not skills["paths"]:
            del skills["paths"]
        if not skills:
            del out["skills"]
    return out, gone


# ---- the commands


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    oc = sub.add_parser("opencode", help="mcpx in opencode: install the MCP entry, plugin and skill; import servers")
    osub = oc.add_subparsers(dest="opencode_cmd", required=True, metavar="COMMAND")

    p = osub.add_parser("install", help="add mcpx serve, the plugin and the skill to opencode.json (or --global)")
    p.add_argument("--global", dest="global_", action="store_true",
                   help="opencode's global config ($OPENCODE_CONFIG_DIR, else ~/.config/opencode/opencode.json)")
    p.add_argument("--uninstall", action="store_true", help="remove exactly what install adds")
    p.add_argument("--entry", default=DEFAULT_ENTRY, metavar="NAME",
                   help="the MCP entry's name (default mcpx: tools reach the model as mcpx_SERVER_TOOL)")
    add_json_flag(p)
    p.set_defaults(func=_guard(install))

    p = osub.add_parser("import", help="move the MCP servers in opencode.json behind mcpx (into mcpx's config)")
    p.add_argument("--global", dest="global_", action="store_true", help="import from opencode's global config")
    p.add_argument("--entry", default=DEFAULT_ENTRY, metavar="NAME", help="mcpx's own MCP entry, which stays")
    add_json_flag(p)
    p.set_defaults(func=_guard(import_servers))


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


def install(args: argparse.Namespace) -> int:
    path = opencode_config(args.global_)
    want = wanted(args.entry)
    before = read_json(path)
    if args.uninstall:
        after, gone = removed(before, want)
        changed = after != before
        deleted = False
        if changed:
            if set(after) <= {"$schema"} and after.get("$schema", SCHEMA_URL) == SCHEMA_URL:
                path.unlink()  # nothing left but what install wrote into a new file
                deleted = True
            else:
                write_json(path, after)
        if args.json:
            emit_json({"action": "uninstall", "config": str(path), "changed": changed, "removed": gone,
                       "deleted": deleted})
        elif changed:
            print(f"mcpx: removed {', '.join(gone)} from {path}" + (" (and the file, now empty)" if deleted else ""))
        else:
            print(f"mcpx: nothing of mcpx's in {path}; nothing changed")
        return 0
    missing = [str(p) for p in (plugin_file(), skill_dir() / "SKILL.md") if not p.exists()]
    if missing:
        raise OpencodeError(f"{', '.join(missing)} not found: {missing_hint()}")
    after = merged(before, want)
    changed = after != before
    if changed:
        write_json(path, after)
    report = {"action": "install", "config": str(path), "changed": changed,
              "mcp": {want.entry: want.mcp}, "plugin": want.plugin_item, "skill": want.skill}
    if args.json:
        emit_json(report)
        return 0
    if not changed:
        print(f"mcpx: already installed in {path}; nothing changed")
        return 0
    print(f"mcpx: installed into {path}")
    print(f"  mcp.{want.entry:<11} {' '.join(want.command)}")
    print(f"  plugin          {want.plugin}" + (f" (entry {want.entry})" if want.entry != DEFAULT_ENTRY else ""))
    print(f"  skills.paths    {want.skill}")
    print("Restart opencode to load them. Servers already in opencode's config can move behind mcpx with "
          "`mcpx opencode import`.")
    return 0


@dataclass
class ImportReport:
    moved: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    passed: dict[str, list[str]] = field(default_factory=dict)  # server → variables its env passes through


class Unimportable(Exception):
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
