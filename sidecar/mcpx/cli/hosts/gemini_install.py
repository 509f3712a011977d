"""`mcpx gemini install [--scope project|user] [--uninstall]`: mcpx and its skill, where Gemini CLI finds them
(docs/gemini.md).

What it writes, in a project (or, with --scope user, in ~/.gemini: cli/hosts/gemini_files.py):

- .gemini/settings.json: `mcpServers.mcpx`, which runs `mcpx serve`, with `env.MCPX_TOOL_PREFIX` naming mcpx's tools
  as Gemini CLI does (`mcp_mcpx_…`). No `timeout`: Gemini CLI cannot show a question (it declares no elicitation), so
  a call that waits on one returns early, after mcpx's elicit.grace (2 s), saying where the question waits — far
  inside Gemini CLI's own MCP timeout (10 minutes unless the entry sets one);
- .gemini/skills/mcpx-elicitation/SKILL.md: the skill.

Every other setting and server is kept; running it twice changes nothing; `--uninstall` removes exactly what it adds
(and an object or the file install created, once left empty: `Created`; the flow: cli/hosts/host_entry.py).
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpx.cli.hosts.gemini_files import MCP_KEY, GeminiPlace, read_json, trusted
from mcpx.cli.hosts.host_cmd import installer
from mcpx.cli.hosts.host_entry import put_entry, take_entry
from mcpx.cli.hosts.host_files import HostConfigError, copied, serve_command, write_json

ENTRY = "mcpx"
ENTRY_SHOWN = f"mcpServers.{ENTRY}"
TOOL_PREFIX = f"mcp_{ENTRY}_"  # how Gemini CLI names the entry's tools: mcp_SERVER_TOOL


def wanted(command: list[str]) -> dict[str, Any]:
    return {"command": command[0], "args": command[1:], "env": {"MCPX_TOOL_PREFIX": TOOL_PREFIX}}


class SettingsJson:
    """Gemini CLI's settings.json, as install edits it (host_entry.EntryFile): plain JSON, rewritten whole."""

    host, label, entry_shown = "gemini", "Gemini CLI", ENTRY_SHOWN
    servers_key, entry = MCP_KEY, ENTRY

    @staticmethod
    def read(path: Path) -> dict[str, Any]:
        return read_json(path)

    @staticmethod
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

    @staticmethod
    def editable(data: dict[str, Any]) -> dict[str, Any]:
        return dict(copied(data))

    @staticmethod
    def is_empty(data: dict[str, Any]) -> bool:
        return not data

    @staticmethod
    def write(path: Path, before: dict[str, Any], after: dict[str, Any]) -> bool:
        if after == before:  # the same settings: the person's file stays as they wrote it
            return False
        write_json(path, after)
        return True


@dataclass
class GeminiInstalled:
    place: GeminiPlace
    entry: dict[str, Any]
    machine: bool
    written: list[str]

    def report(self) -> dict[str, Any]:
        place = self.place
        return {"action": "install", "scope": place.scope, "root": str(place.root), "settings": str(place.config),
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
            print(f"  {place.shown(place.config):<42} {MCP_KEY}.{ENTRY} runs `{command}`")
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


def apply(place: GeminiPlace) -> GeminiInstalled:
    before = read_json(place.config)
    command, machine = serve_command()
    entry = wanted(command)
    return GeminiInstalled(place, entry, machine, put_entry(SettingsJson(), place, before, entry))


def _uninstall(args: argparse.Namespace, place: GeminiPlace) -> int:
    return take_entry(args, SettingsJson(), place)


install = installer(GeminiPlace.of, apply, _uninstall)
