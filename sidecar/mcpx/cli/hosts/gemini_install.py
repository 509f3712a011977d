"""`mcpx gemini install [--scope project|user] [--uninstall]`: mcpx and its skill, where Gemini CLI finds them
(docs/gemini.md).

What it writes, in a project (or, with --scope user, in ~/.gemini: cli/hosts/gemini_files.py):

- .gemini/settings.json: `mcpServers.mcpx`, which runs `mcpx serve`, with `env.MCPX_TOOL_PREFIX` naming mcpx's tools
  as Gemini CLI does (`mcp_mcpx_…`). No `timeout`: Gemini CLI cannot show a question (it declares no elicitation), so
  a call that waits on one returns early, after mcpx's elicit.grace (2 s), saying where the question waits — far
  inside Gemini CLI's own MCP timeout (10 minutes unless the entry sets one);
- .gemini/skills/mcpx-elicitation/SKILL.md: the skill.

Every other setting and server is kept; running it twice changes nothing; `--uninstall` removes exactly what it adds
(and an object or the file install created, once left empty: `Created`).
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpx.cli.hosts.gemini_files import MCP_KEY, Place, read_json, trusted
from mcpx.cli.hosts.host_cmd import installer, undone
from mcpx.cli.hosts.host_files import (
    Created,
    HostConfigError,
    copied,
    prune,
    put_skill,
    runs_mcpx,
    serve_command,
    take_skill,
    write_json,
)

ENTRY = "mcpx"
ENTRY_SHOWN = f"mcpServers.{ENTRY}"
TOOL_PREFIX = f"mcp_{ENTRY}_"  # how Gemini CLI names the entry's tools: mcp_SERVER_TOOL


def is_mcpx_entry(entry: Any) -> bool:
    """An `mcpServers` entry that runs `mcpx serve` (as install writes it, from any installation)."""
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args", [])
    return isinstance(command, str) and isinstance(args, list) and runs_mcpx([command, *map(str, args)], "serve")


def wanted(command: list[str]) -> dict[str, Any]:
    return {"command": command[0], "args": command[1:], "env": {"MCPX_TOOL_PREFIX": TOOL_PREFIX}}


def with_entry(data: dict[str, Any], entry: dict[str, Any], created: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = copied(data)
    if MCP_KEY not in out:
        created.append(MCP_KEY)
    servers = out.setdefault(MCP_KEY, {})
    if not isinstance(servers, dict):
        raise HostConfigError(f"{MCP_KEY} is not an object; fix it first")
    had = servers.get(ENTRY)
    servers[ENTRY] = {**(had if isinstance(had, dict) else {}), **entry}  # the person's other keys in it kept
    return out


def without(data: dict[str, Any], created: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = copied(data)
    servers = out.get(MCP_KEY)
    if isinstance(servers, dict) and is_mcpx_entry(servers.get(ENTRY)):
        del servers[ENTRY]
        if not servers and MCP_KEY in created:
            del out[MCP_KEY]
    return out


@dataclass
class Installed:
    place: Place
    entry: dict[str, Any]
    machine: bool
    written: list[str]

    def report(self) -> dict[str, Any]:
        place = self.place
        return {"action": "install", "scope": place.scope, "root": str(place.root), "settings": str(place.settings),
                "skill": str(place.skill), "changed": bool(self.written), "written": self.written,
                "entry": {ENTRY: self.entry}, "machineSpecific": self.machine, "trusted": trusted(Path.cwd().resolve())}

    def tell(self) -> None:
        place = self.place
        where = f"{place.scope} scope, {place.root}"
        if not self.written:
            print(f"mcpx: already installed for Gemini CLI ({where}); nothing changed")
        else:
            print(f"mcpx: installed for Gemini CLI ({where})")
            command = shlex.join([self.entry["command"], *self.entry["args"]])
            print(f"  {place.shown(place.settings):<42} {MCP_KEY}.{ENTRY} runs `{command}`")
            print(f"  {place.shown(place.skill / 'SKILL.md'):<42} the mcpx-elicitation skill")
        if self.machine:
            print(f"mcpx: the entry names this machine's mcpx ({self.entry['command']}), not one on PATH. Put this one "
                  "on PATH and install again to get a file anyone can commit.")
        if not trusted(Path.cwd().resolve()):
            print(f"mcpx: Gemini CLI runs no MCP server (yours included) in a folder you have not trusted, and "
                  f"{Path.cwd()} is not: trust it when Gemini CLI asks there (or with /permissions)")
        if self.written:
            print("Next: start (or restart) Gemini CLI; its tools are mcp_mcpx_SERVER_TOOL. It cannot show a "
                  "server's question: a question for you waits in mcpx (`mcpx tui`, the inbox, a notification), and "
                  "the call returns at once saying so.")


def apply(place: Place) -> Installed:
    before = read_json(place.settings)
    command, machine = serve_command()
    entry = wanted(command)
    record = Created("gemini")
    created = [] if place.settings.exists() else [""]
    after = with_entry(before, entry, created)
    written: list[str] = []
    if after != before:
        write_json(place.settings, after)
        record.note(place.settings, created)
        written.append(place.shown(place.settings))
    if put_skill(place.skill):
        written.append(place.shown(place.skill / "SKILL.md"))
    record.save()
    return Installed(place, entry, machine, written)


def _uninstall(args: argparse.Namespace, place: Place) -> int:
    before = read_json(place.settings)
    record = Created("gemini")
    created = record.of(place.settings)
    after = without(before, created)
    files: list[str] = []
    deleted = False
    if after != before:
        files.append(place.shown(place.settings))
        if not after and "" in created:
            place.settings.unlink()
            deleted = True
        else:
            write_json(place.settings, after)
        record.forget(place.settings)
    if take_skill(place.skill, place.root):
        files.append(place.shown(place.skill / "SKILL.md"))
    prune(place.settings.parent, place.root)
    record.save()
    return undone(args, "Gemini CLI", place.scope, place.root, ENTRY_SHOWN, files,
                  [place.shown(place.settings)] if deleted else [])


install = installer(Place.of, apply, _uninstall)
