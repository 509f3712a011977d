"""`mcpx claude install [--scope project|user] [--uninstall]`: mcpx, its hook and its skill, where Claude Code finds
them (docs/claude-code.md).

What it writes, in a project (or, with --scope user, in the user's own files: cli/hosts/claude_files.py):

- .mcp.json (user: ~/.claude.json): `mcpServers.mcpx`, which runs `mcpx serve`;
- .claude/settings.json (user: ~/.claude/settings.json): the `Elicitation` hook for the server mcpx, which runs
  `mcpx claude hook` (cli/hosts/claude_hook.py) with a timeout of the longest question's TTL in mcpx's config plus
  HOOK_MARGIN: past it Claude Code kills the hook and answers cancel, which mcpx does not take from it;
- .claude/settings.local.json (project only): "mcpx" in `enabledMcpjsonServers`, the approval Claude Code records
  when the person chooses to use a project's server (its dialog's default is "continue without");
- .claude/skills/mcpx-elicitation/SKILL.md: the skill.

Every other setting and hook is kept; running it twice changes nothing; `--uninstall` removes exactly what it adds.
An object or list install had to create (and a file) goes when uninstall leaves it empty; one that was there
before is kept: install notes what it created in mcpx's state directory (`Created`).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpx.cli.common import emit_json
from mcpx.cli.hosts.claude_files import MCP_KEY, ClaudePlace, read_json
from mcpx.cli.hosts.host_cmd import installer
from mcpx.cli.hosts.host_files import (
    Created,
    HostConfigError,
    copied,
    longest_wait,
    prune,
    runs_mcpx,
    serve_command,
    shell_words,
    write_if_changed,
    write_json,
)
from mcpx.system.assets import missing_hint, skill_dir

ENTRY = "mcpx"  # the MCP entry's name, and the hook's matcher (Claude Code matches the server's name)
TOOL_PREFIX = f"mcp__{ENTRY}__"  # how Claude Code names the entry's tools; mcpx's texts name them so
HOOK_MARGIN = 60  # s past the longest TTL: the hook's own wait ends 5 s past its question's deadline
HOOKS, EVENT, APPROVED = "hooks", "Elicitation", "enabledMcpjsonServers"


def is_mcpx_entry(entry: Any) -> bool:
    """An MCP entry of Claude Code's that runs `mcpx serve` (as install writes it, from any installation)."""
    if not isinstance(entry, dict) or entry.get("type", "stdio") != "stdio":
        return False
    command, args = entry.get("command"), entry.get("args", [])
    return isinstance(command, str) and isinstance(args, list) and runs_mcpx([command, *map(str, args)], "serve")


def is_mcpx_hook(hook: Any) -> bool:
    """A hook that runs `mcpx claude hook`."""
    return (isinstance(hook, dict) and hook.get("type") == "command" and isinstance(hook.get("command"), str)
            and runs_mcpx(shell_words(hook["command"]), "claude", "hook"))


def hook_timeout(cwd: Path) -> int:
    """The hook's timeout (s): the longest a question can wait in mcpx's config as it loads here, plus
    HOOK_MARGIN."""
    return longest_wait(cwd, "the hook's timeout") + HOOK_MARGIN


@dataclass(frozen=True)
class ClaudeWanted:
    command: list[str]  # `mcpx serve`, as serve_command() resolves it
    timeout: int

    @property
    def mcp(self) -> dict[str, Any]:
        return {"type": "stdio", "command": self.command[0], "args": self.command[1:],
                "env": {"MCPX_TOOL_PREFIX": TOOL_PREFIX}}

    @property
    def hook_command(self) -> str:
        return shlex.join([*self.command[:-1], "claude", "hook"])

    @property
    def group(self) -> dict[str, Any]:
        return {"matcher": ENTRY, "hooks": [{"type": "command", "command": self.hook_command,
                                             "timeout": self.timeout}]}


# ---- the changes, each on a copy of one file's data


def _at(data: dict[str, Any], keys: list[str], kind: type, file: Path, created: list[str]) -> Any:
    """The object or list at `keys`, made (and noted in `created`) where it is missing."""
    node: Any = data
    for i, key in enumerate(keys):
        want = kind if i == len(keys) - 1 else dict
        if key not in node:
            node[key] = want()
            created.append("/".join(keys[:i + 1]))
        elif not isinstance(node[key], want):
            raise HostConfigError(f"{file}: {'.'.join(keys[:i + 1])} is not {'a list' if want is list else 'an object'}"
                                  "; fix it first")
        node = node[key]
    return node


def _drop_empty(data: dict[str, Any], keys: list[str], created: set[str]) -> None:
    """Remove the objects and lists along `keys` that install created and are now empty, the deepest first."""
    for depth in range(len(keys), 0, -1):
        parent: Any = data
        for key in keys[:depth - 1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        key = keys[depth - 1]
        if not (isinstance(parent, dict) and parent.get(key) in ({}, []) and "/".join(keys[:depth]) in created):
            return
        del parent[key]


def _without_ours(group: Any) -> Any:
    """A hook group less mcpx's hook; None when nothing else was in it."""
    if not isinstance(group, dict) or not isinstance(group.get(HOOKS), list):
        return group
    kept = [h for h in group[HOOKS] if not is_mcpx_hook(h)]
    if len(kept) == len(group[HOOKS]):
        return group
    return {**group, HOOKS: kept} if kept else None


Change = Callable[[dict[str, Any], ClaudeWanted, Path, list[str]], dict[str, Any]]


def with_entry(data: dict[str, Any], want: ClaudeWanted, file: Path, created: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = copied(data)
    _at(out, [MCP_KEY], dict, file, created)[ENTRY] = want.mcp
    return out


def with_hook(data: dict[str, Any], want: ClaudeWanted, file: Path, created: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = copied(data)
    groups = _at(out, [HOOKS, EVENT], list, file, created)
    ours = [g for g in groups if _without_ours(g) is not g]
    if ours != [want.group]:  # missing, with another timeout or mcpx, or twice: once, as wanted, at the end
        groups[:] = [g for g in map(_without_ours, groups) if g is not None] + [want.group]
    return out


def with_approval(data: dict[str, Any], want: ClaudeWanted, file: Path, created: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = copied(data)
    approved = _at(out, [APPROVED], list, file, created)
    if ENTRY not in approved:
        approved.append(ENTRY)
    return out


def without(data: dict[str, Any], created: set[str]) -> tuple[dict[str, Any], list[str]]:
    """`data` less all that install adds to any of its files, and what went."""
    out: dict[str, Any] = copied(data)
    gone: list[str] = []
    servers = out.get(MCP_KEY)
    if isinstance(servers, dict) and is_mcpx_entry(servers.get(ENTRY)):
        del servers[ENTRY]
        gone.append(f"{MCP_KEY}.{ENTRY}")
        _drop_empty(out, [MCP_KEY], created)
    groups = out.get(HOOKS, {}).get(EVENT) if isinstance(out.get(HOOKS), dict) else None
    if isinstance(groups, list) and (kept := [g for g in map(_without_ours, groups) if g is not None]) != groups:
        groups[:] = kept
        gone.append(f"{HOOKS}.{EVENT}")
        _drop_empty(out, [HOOKS, EVENT], created)
    approved = out.get(APPROVED)
    if isinstance(approved, list) and ENTRY in approved:
        approved[:] = [name for name in approved if name != ENTRY]
        gone.append(f"{APPROVED}[{ENTRY}]")
        _drop_empty(out, [APPROVED], created)
    return out, gone


# ---- the command


def _files(place: ClaudePlace) -> list[tuple[Path, Change]]:
    changes: list[tuple[Path, Change]] = [(place.mcp, with_entry), (place.settings, with_hook)]
    if place.approvals is not None:
        changes.append((place.approvals, with_approval))
    return changes


@dataclass
class ClaudeInstalled:
    """What one install did, and what it wants in each file."""

    place: ClaudePlace
    want: ClaudeWanted
    machine: bool  # the entry names this machine's mcpx, not the one on PATH
    written: list[str]
    disabled: bool  # the person turned the project's mcpx off (disabledMcpjsonServers)
    on_path: str | None = field(default_factory=lambda: shutil.which("mcpx"))

    def report(self) -> dict[str, Any]:
        place = self.place
        return {"action": "install", "scope": place.scope, "root": str(place.root), "mcp": str(place.mcp),
                "settings": str(place.settings), "approvals": str(place.approvals) if place.approvals else None,
                "skill": str(place.skill), "changed": bool(self.written), "written": self.written,
                "entry": {ENTRY: self.want.mcp}, "hook": {EVENT: [self.want.group]}, "hookTimeout": self.want.timeout,
                "machineSpecific": self.machine, "mcpxOnPath": self.on_path}

    def tell(self) -> None:
        place, want = self.place, self.want
        where = f"{place.scope} scope, {place.root}"
        if not self.written:
            print(f"mcpx: already installed for Claude Code ({where}); nothing changed")
            return
        print(f"mcpx: installed for Claude Code ({where})")
        print(f"  {place.shown(place.mcp):<42} {MCP_KEY}.{ENTRY} runs `{shlex.join(want.command)}`")
        print(f"  {place.shown(place.settings):<42} the {EVENT} hook for {ENTRY}: `{want.hook_command}`, timeout "
              f"{want.timeout} s (the longest question's TTL in mcpx's config + {HOOK_MARGIN} s)")
        if place.approvals is not None:
            print(f"  {place.shown(place.approvals):<42} {ENTRY} approved in {APPROVED}, so Claude Code starts it "
                  "without asking (this file is yours alone: not to be committed)")
            if git_ignores(place.approvals) is False:
                print(f"mcpx: git does not ignore {place.shown(place.approvals)}: add it to .gitignore so it is not "
                      f"committed (echo {shlex.quote(place.shown(place.approvals))} >> .gitignore)")
        print(f"  {place.shown(place.skill / 'SKILL.md'):<42} the mcpx-elicitation skill")
        if self.disabled:
            print(f"mcpx: {place.approvals} also lists {ENTRY} in disabledMcpjsonServers: Claude Code will not "
                  "start it until you take it out of that list")
        if self.machine:
            print(f"mcpx: the entry and the hook name this machine's mcpx ({want.command[0]}): the mcpx on PATH is "
                  f"{'another one: ' + self.on_path if self.on_path else 'not there'}. Put this one on PATH and "
                  "install again to get files anyone can commit.")
        elif place.scope == "project":
            print(".mcp.json, .claude/settings.json and the skill name no path of this machine: they can be "
                  "committed.")
        print(f"Next: start (or restart) Claude Code{' in this project' if place.scope == 'project' else ''}; its "
              f"tools are {TOOL_PREFIX}SERVER_TOOL. MCP servers already in Claude Code's config move behind mcpx "
              f"with `mcpx claude import{' --scope user' if place.scope == 'user' else ''}`. When you change a TTL "
              "in mcpx's config, install again: the hook's timeout follows it.")


def git_ignores(path: Path) -> bool | None:
    """Whether git ignores `path`; None when it is in no git work tree (or there is no git to ask)."""
    try:
        asked = subprocess.run(["git", "-C", str(path.parent), "check-ignore", "-q", str(path)],
                               capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {0: True, 1: False}.get(asked.returncode)  # 128: not a work tree


def apply(place: ClaudePlace) -> ClaudeInstalled:
    """Install into `place`: every file read first (one refused, none written), each written only if it changes."""
    files = _files(place)
    before = {path: read_json(path) for path, _ in files}
    skill = skill_dir() / "SKILL.md"
    if not skill.is_file():
        raise HostConfigError(f"{skill} not found: {missing_hint()}")
    command, machine = serve_command()
    want = ClaudeWanted(command, hook_timeout(Path.cwd()))
    record = Created("claude")
    written: list[str] = []
    for path, change in files:
        created = [] if path.exists() else [""]
        after = change(before[path], want, path, created)
        if after != before[path]:
            write_json(path, after)
            record.note(path, created)
            written.append(place.shown(path))
    if write_if_changed(place.skill / "SKILL.md", skill.read_text(encoding="utf-8")):
        written.append(place.shown(place.skill / "SKILL.md"))
    record.save()
    disabled = place.approvals is not None and ENTRY in (before[place.approvals].get("disabledMcpjsonServers") or [])
    return ClaudeInstalled(place, want, machine, written, disabled)


def _uninstall(args: argparse.Namespace, place: ClaudePlace) -> int:
    before = {path: read_json(path) for path, _ in _files(place)}
    record = Created("claude")
    removed: dict[str, list[str]] = {}
    deleted: list[str] = []
    for path, _ in _files(place):
        created = record.of(path)
        after, gone = without(before[path], created)
        if after == before[path]:
            continue
        removed[str(path)] = gone
        if not after and "" in created:
            path.unlink()
            deleted.append(str(path))
        else:
            write_json(path, after)
        record.forget(path)
    files: list[str] = []
    skill = place.skill / "SKILL.md"
    if skill.is_file() and "\nname: mcpx-elicitation\n" in skill.read_text(encoding="utf-8"):
        skill.unlink()
        files.append(place.shown(skill))
    for folder in (place.skill, place.settings.parent):
        prune(folder, place.root)
    record.save()
    changed = bool(removed or files)
    if args.json:
        emit_json({"action": "uninstall", "scope": place.scope, "root": str(place.root), "changed": changed,
                   "removed": removed, "deleted": deleted, "files": files})
        return 0
    if not changed:
        print(f"mcpx: nothing of mcpx's for Claude Code ({place.scope} scope, {place.root}); nothing changed")
        return 0
    for shown, gone in removed.items():
        print(f"mcpx: removed {', '.join(gone)} from {shown}"
              + (" (and the file, now empty)" if shown in deleted else ""))
    if files:
        print(f"mcpx: removed {', '.join(files)}")
    return 0


install = installer(ClaudePlace.of, apply, _uninstall)
