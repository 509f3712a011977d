"""`mcpx opencode install [--global] [--uninstall]`: mcpx, its plugin and its skill, where opencode finds them.

What it writes, in a project (or, with --global, in opencode's own config directory):

- opencode.json: the MCP entry that runs `mcpx serve`, and the plugin's server part (`"plugin"`);
- tui.json: the plugin's TUI part — mcpx's own dialog in opencode's TUI (opencode loads TUI plugins only from
  there);
- .opencode/mcpx/: the plugin's two entry points, which load the plugin of the mcpx on PATH (or $MCPX_BIN) when
  opencode starts; the same on every machine, so the project's files can be committed;
- .opencode/skills/mcpx-elicitation/SKILL.md: the skill, which opencode finds there by itself.

Every other setting is kept; running it twice changes nothing; `--uninstall` removes exactly what it adds (and
what an older mcpx added: a plugin or skill named by its path). opencode's config files are written as plain
JSON; a file with comments is refused rather than rewritten without them.
"""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mcpx.cli.common import emit_json
from mcpx.cli.hosts.host_files import copied, prune, runs_mcpx, serve_command, write_if_changed
from mcpx.cli.hosts.opencode_files import (
    SCHEMA_URL,
    OpencodeError,
    global_config_dir,
    opencode_config,
    read_json,
    write_json,
)
from mcpx.system.assets import missing_hint, plugin_dir, skill_dir

DEFAULT_ENTRY = "mcpx"
TUI_SCHEMA_URL = "https://opencode.ai/tui.json"
MARK = "// Written by `mcpx opencode install`"  # the first words of each entry point's script
# the plugin and the skill as an older mcpx named them in opencode.json: by their paths on one machine
_OLD_PLUGIN_ENDS = ("/plugin/opencode/dist/index.js", "/plugin/opencode/dist", "/mcpx/assets/opencode/index.js",
                    "/mcpx/assets/opencode")
_OLD_SKILL_END = "/skills/mcpx-elicitation"


ENTRY_POINTS = ("package.json", "server.js", "tui.js")  # plugin/opencode/entry/, copied as they are


@dataclass(frozen=True)
class OpencodePlace:
    """Where install writes, for a project or for opencode's global config directory."""

    root: Path
    opencode: Path
    tui: Path
    entry_points: Path
    skill: Path

    @staticmethod
    def of(global_: bool, cwd: Path | None = None) -> OpencodePlace:
        if global_:
            root = global_config_dir()
            dot = root
        else:
            root = (cwd or Path.cwd()).resolve()
            dot = root / ".opencode"
        config = opencode_config(global_, cwd)
        here = config.parent
        tuis = [here / "tui.json", here / "tui.jsonc"]
        return OpencodePlace(root, config, next((t for t in tuis if t.is_file()), tuis[0]), dot / "mcpx",
                     dot / "skills" / "mcpx-elicitation")

    def spec(self, config: Path) -> str:
        """The plugin as a config file names it: a path relative to that file's folder."""
        return "./" + str(PurePosixPath(*Path(os.path.relpath(self.entry_points, config.parent)).parts))

    def shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def _plugin_spec_of(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, list) and item and isinstance(item[0], str):
        return item[0]
    return None


def _ours(spec: str | None, want: str) -> bool:
    return spec is not None and (spec == want or spec.rstrip("/").endswith(_OLD_PLUGIN_ENDS))


def is_mcpx_entry(entry: Any) -> bool:
    """An MCP entry that runs `mcpx serve` (as install writes it, from any installation)."""
    if not isinstance(entry, dict) or entry.get("type", "local") != "local":
        return False
    command = entry.get("command")
    return isinstance(command, list) and runs_mcpx(command, "serve")


@dataclass
class OpencodeWanted:
    entry: str
    command: list[str]

    @property
    def mcp(self) -> dict[str, Any]:
        # MCPX_TOOL_PREFIX: opencode shows mcpx's tools as <entry>_<tool>, and mcpx's texts name them so
        return {"type": "local", "command": self.command, "enabled": True,
                "environment": {"MCPX_TOOL_PREFIX": f"{self.entry}_"}}

    def options(self) -> dict[str, Any]:
        """The plugin's options: the entry's name when it is not mcpx, and the mcpx that starts a daemon when the one
        on PATH is not this one."""
        out: dict[str, Any] = {}
        if self.entry != DEFAULT_ENTRY:
            out["entry"] = self.entry
        if self.command[:-1] != ["mcpx"]:
            out["mcpx"] = self.command[:-1]
        return out

    def plugin_item(self, spec: str, server: bool) -> Any:
        options = self.options() if server else {k: v for k, v in self.options().items() if k == "entry"}
        return [spec, options] if options else spec


def _with_plugin(data: dict[str, Any], item: Any, spec: str) -> dict[str, Any]:
    out: dict[str, Any] = copied(data)  # a deep copy, keys in their order
    plugins = out.get("plugin")
    if plugins is None:
        plugins = out["plugin"] = []
    elif not isinstance(plugins, list):
        raise OpencodeError("'plugin' in opencode's config is not a list; fix it first")
    ours = [p for p in plugins if _ours(_plugin_spec_of(p), spec)]
    if ours != [item]:  # missing, an older mcpx's, with other options, or twice: once, as wanted, at the end
        out["plugin"] = [p for p in plugins if not _ours(_plugin_spec_of(p), spec)] + [item]
    return out


def merged(data: dict[str, Any], want: OpencodeWanted, spec: str) -> dict[str, Any]:
    out: dict[str, Any] = copied(data)  # a deep copy, keys in their order
    if not out:
        out["$schema"] = SCHEMA_URL
    mcp = out.get("mcp")
    if mcp is None:
        mcp = out["mcp"] = {}
    elif not isinstance(mcp, dict):
        raise OpencodeError("'mcp' in opencode's config is not an object; fix it first")
    mcp[want.entry] = want.mcp
    out = _with_plugin(out, want.plugin_item(spec, server=True), spec)
    skills = out.get("skills")
    if isinstance(skills, dict) and isinstance(skills.get("paths"), list):
        # an older mcpx named the skill by its path; it is in the config directory's skills/ now
        kept = [p for p in skills["paths"] if not str(p).rstrip("/").endswith(_OLD_SKILL_END)]
        if kept != skills["paths"]:
            skills["paths"] = kept
            if not kept:
                del skills["paths"]
            if not skills:
                del out["skills"]
    return out


def merged_tui(data: dict[str, Any], want: OpencodeWanted, spec: str) -> dict[str, Any]:
    out = _with_plugin(data, want.plugin_item(spec, server=False), spec)
    if not data:
        out = {"$schema": TUI_SCHEMA_URL, **out}
    return out


def removed(data: dict[str, Any], want: OpencodeWanted, spec: str, mcp_too: bool) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = copied(data)
    gone: list[str] = []
    mcp = out.get("mcp")
    if mcp_too and isinstance(mcp, dict) and is_mcpx_entry(mcp.get(want.entry)):
        del mcp[want.entry]
        gone.append(f"mcp.{want.entry}")
        if not mcp:
            del out["mcp"]
    plugins = out.get("plugin")
    if isinstance(plugins, list):
        kept = [p for p in plugins if not _ours(_plugin_spec_of(p), spec)]
        if len(kept) != len(plugins):
            gone.append("plugin")
            if kept:
                out["plugin"] = kept
            else:
                del out["plugin"]
    skills = out.get("skills")
    if isinstance(skills, dict) and isinstance(skills.get("paths"), list):
        kept_paths = [p for p in skills["paths"] if not str(p).rstrip("/").endswith(_OLD_SKILL_END)]
        if kept_paths != skills["paths"]:
            gone.append("skills.paths")
            skills["paths"] = kept_paths
            if not kept_paths:
                del skills["paths"]
            if not skills:
                del out["skills"]
    return out, gone


def _config_changed(path: Path, before: dict[str, Any], after: dict[str, Any], schema: str) -> tuple[bool, bool]:
    """Write `after` to `path` if it differs; (changed, deleted: nothing left but what install put in a new file)."""
    if after == before:
        return False, False
    if set(after) <= {"$schema"} and after.get("$schema", schema) == schema:
        if path.exists():
            path.unlink()
        return True, True
    write_json(path, after)
    return True, False


def install(args: argparse.Namespace) -> int:
    place = OpencodePlace.of(args.global_)
    command, machine = serve_command()
    want = OpencodeWanted(args.entry, command)
    oc_spec, tui_spec = place.spec(place.opencode), place.spec(place.tui)
    oc_before, tui_before = read_json(place.opencode), read_json(place.tui)
    if args.uninstall:
        return _uninstall(args, place, want, oc_before, tui_before)
    source, skill = plugin_dir(), skill_dir()
    missing = [str(p) for p in (source / "index.js", source / "tui.js", *(source / "entry" / n for n in ENTRY_POINTS),
                                skill / "SKILL.md") if not p.exists()]
    if missing:
        raise OpencodeError(f"{', '.join(missing)} not found: {missing_hint()}")
    oc_after, tui_after = merged(oc_before, want, oc_spec), merged_tui(tui_before, want, tui_spec)
    written: list[str] = []
    if oc_after != oc_before:
        write_json(place.opencode, oc_after)
        written.append(place.shown(place.opencode))
    if tui_after != tui_before:
        write_json(place.tui, tui_after)
        written.append(place.shown(place.tui))
    for name in ENTRY_POINTS:
        if write_if_changed(place.entry_points / name, (source / "entry" / name).read_text(encoding="utf-8")):
            written.append(place.shown(place.entry_points / name))
    if write_if_changed(place.skill / "SKILL.md", (skill / "SKILL.md").read_text(encoding="utf-8")):
        written.append(place.shown(place.skill / "SKILL.md"))
    on_path = shutil.which(os.environ.get("MCPX_BIN") or "mcpx")
    report = {"action": "install", "root": str(place.root), "config": str(place.opencode), "tui": str(place.tui),
              "changed": bool(written), "written": written, "mcp": {want.entry: want.mcp},
              "plugin": want.plugin_item(oc_spec, server=True), "tuiPlugin": want.plugin_item(tui_spec, server=False),
              "entryPoints": str(place.entry_points), "skill": str(place.skill), "machineSpecific": machine,
              "mcpxOnPath": on_path}
    if args.json:
        emit_json(report)
        return 0
    if not written:
        print(f"mcpx: already installed for opencode in {place.root}; nothing changed")
        return 0
    print(f"mcpx: installed for opencode in {place.root}")
    print(f"  {place.shown(place.opencode):<40} mcp.{want.entry} runs `{' '.join(command)}`; the plugin's server "
          f"part: {oc_spec}")
    print(f"  {place.shown(place.tui):<40} the plugin's TUI part: {tui_spec} (mcpx's own dialog for the person's "
          "questions)")
    print(f"  {place.shown(place.entry_points) + '/':<40} the plugin's entry points: they load the plugin of the "
          "mcpx on PATH")
    print(f"  {place.shown(place.skill / 'SKILL.md'):<40} the mcpx-elicitation skill")
    if machine:
        print(f"mcpx: mcp.{want.entry} names this machine's mcpx ({command[0]}): the mcpx on PATH is "
              f"{'another one: ' + on_path if on_path else 'not there'}. Put this one on PATH and install again to "
              "get a file anyone can commit.")
    elif not args.global_:
        print("None of it names a path of this machine: it can be committed.")
    if on_path is None:
        print("mcpx: there is no `mcpx` on PATH, and the plugin's entry points look for it there (or in $MCPX_BIN): "
              "add this mcpx's bin directory to PATH before starting opencode.")
    print("Next: start (or restart) opencode in this project. A question for you opens in mcpx's dialog in its TUI; "
          "MCP servers already in opencode's config move behind mcpx with `mcpx opencode import`.")
    return 0


def _uninstall(args: argparse.Namespace, place: OpencodePlace, want: OpencodeWanted, oc_before: dict[str, Any],
               tui_before: dict[str, Any]) -> int:
    oc_after, oc_gone = removed(oc_before, want, place.spec(place.opencode), mcp_too=True)
    tui_after, tui_gone = removed(tui_before, want, place.spec(place.tui), mcp_too=False)
    oc_changed, oc_deleted = _config_changed(place.opencode, oc_before, oc_after, SCHEMA_URL)
    tui_changed, tui_deleted = _config_changed(place.tui, tui_before, tui_after, TUI_SCHEMA_URL)
    files: list[str] = []
    for name in ENTRY_POINTS:
        path = place.entry_points / name
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text.startswith(MARK) or (name == "package.json" and '"name": "mcpx-opencode"' in text):
            path.unlink()
            files.append(place.shown(path))
    skill = place.skill / "SKILL.md"
    if skill.is_file() and "\nname: mcpx-elicitation\n" in skill.read_text(encoding="utf-8"):
        skill.unlink()
        files.append(place.shown(skill))
    for folder in (place.entry_points, place.skill):
        prune(folder, place.root)
    changed = oc_changed or tui_changed or bool(files)
    if args.json:
        emit_json({"action": "uninstall", "config": str(place.opencode), "tui": str(place.tui), "changed": changed,
                   "removed": oc_gone, "removedTui": tui_gone, "files": files, "deleted": oc_deleted,
                   "deletedTui": tui_deleted})
        return 0
    if not changed:
        print(f"mcpx: nothing of mcpx's in {place.root}; nothing changed")
        return 0
    if oc_gone:
        print(f"mcpx: removed {', '.join(oc_gone)} from {place.opencode}"
              + (" (and the file, now empty)" if oc_deleted else ""))
    if tui_gone:
        print(f"mcpx: removed {', '.join(tui_gone)} from {place.tui}"
              + (" (and the file, now empty)" if tui_deleted else ""))
    if files:
        print(f"mcpx: removed {', '.join(files)}")
    return 0
