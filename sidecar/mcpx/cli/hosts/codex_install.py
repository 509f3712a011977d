"""`mcpx codex install [--scope project|user] [--uninstall]`: mcpx and its skill, where Codex CLI finds them
(docs/codex.md).

What it writes, in a project (or, with --scope user, in `$CODEX_HOME`: cli/hosts/codex_files.py):

- .codex/config.toml (user: ~/.codex/config.toml): the table `[mcp_servers.mcpx]`, which runs `mcpx serve`, with
  `tool_timeout_sec` the longest question's TTL in mcpx's config plus TIMEOUT_MARGIN (Codex shows a question in its
  own form, and gives up on the call when its tool timeout, 60 s by default, runs out while the form is open),
  `env_vars` naming the variables that say where mcpx's daemon and config are (Codex gives a server a fixed few of
  its own and no others), and `env.MCPX_TOOL_PREFIX`, how Codex names mcpx's tools;
- .codex/skills/mcpx-elicitation/SKILL.md (user: ~/.codex/skills/): the skill.

The file is edited in place with tomlkit: every comment, table and key of the person's stays as it was, and a key
the person added to mcpx's table (`default_tools_approval_mode`, say) stays too. Running it twice changes nothing;
`--uninstall` removes exactly what it adds; a file that is not valid TOML is refused, untouched (the flow:
cli/hosts/host_entry.py).
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Table

from mcpx.cli.hosts.codex_files import MCP_KEY, CodexPlace, plain, read_toml, write_toml
from mcpx.cli.hosts.host_cmd import installer
from mcpx.cli.hosts.host_entry import put_entry, take_entry
from mcpx.cli.hosts.host_files import HostConfigError, longest_wait, serve_command

ENTRY = "mcpx"
ENTRY_SHOWN = f"[mcp_servers.{ENTRY}]"
TOOL_PREFIX = f"mcp__{ENTRY}__"  # how Codex names the entry's tools (its namespace mcp__mcpx, then the tool)
TIMEOUT_MARGIN = 60  # s past the longest TTL: a question's end reaches the call a moment after its deadline
# what locates mcpx's daemon, state and config: passed through from Codex's environment when set there
PASSED = ("MCPX_HOME", "MCPX_CONFIG", "MCPX_USER_CONFIG", "MCPX_DAEMON_URL", "MCPX_TOKEN", "MCPX_SESSION_ID",
          "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CACHE_HOME")
OURS = ("command", "args", "env", "env_vars", "tool_timeout_sec")  # the keys of mcpx's table that install writes


@dataclass(frozen=True)
class CodexWanted:
    command: list[str]  # `mcpx serve`, as serve_command() resolves it
    timeout: int

    @property
    def entry(self) -> dict[str, Any]:
        return {"command": self.command[0], "args": self.command[1:], "env": {"MCPX_TOOL_PREFIX": TOOL_PREFIX},
                "env_vars": list(PASSED), "tool_timeout_sec": self.timeout}


class ConfigToml:
    """Codex's config.toml, as install edits it (host_entry.EntryFile): in place, with tomlkit."""

    host, label, entry_shown = "codex", "Codex", ENTRY_SHOWN
    servers_key, entry = MCP_KEY, ENTRY

    @staticmethod
    def read(path: Path) -> tomlkit.TOMLDocument:
        return read_toml(path)

    @staticmethod
    def with_entry(doc: tomlkit.TOMLDocument, entry: dict[str, Any], created: list[str]) -> tomlkit.TOMLDocument:
        servers = doc.get(MCP_KEY)
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc[MCP_KEY] = servers
            created.append(MCP_KEY)
        elif not isinstance(servers, dict):
            raise HostConfigError(f"{MCP_KEY} is not a table; fix it first")
        table = servers.get(ENTRY)
        if table is None:
            table = tomlkit.table()
            servers[ENTRY] = table
        elif not isinstance(table, Table):
            raise HostConfigError(f"{MCP_KEY}.{ENTRY} is not a table; fix it first")
        for key, value in entry.items():
            current = table.get(key)
            if current is None or plain(current) != value:
                table[key] = tomlkit.inline_table() if key == "env" else value
                if key == "env":
                    table[key].update(value)
        return doc

    @staticmethod
    def editable(doc: tomlkit.TOMLDocument) -> tomlkit.TOMLDocument:
        return doc  # edited in place: its comments and layout stay with it

    @staticmethod
    def is_empty(doc: tomlkit.TOMLDocument) -> bool:
        return not tomlkit.dumps(doc).strip()

    @staticmethod
    def write(path: Path, before: tomlkit.TOMLDocument, after: tomlkit.TOMLDocument) -> bool:
        return write_toml(path, after)  # edited in place: the text on disk is what tells a change


@dataclass
class CodexInstalled:
    place: CodexPlace
    want: CodexWanted
    machine: bool  # the entry names this machine's mcpx, not the one on PATH
    written: list[str]

    def report(self) -> dict[str, Any]:
        place = self.place
        return {"action": "install", "scope": place.scope, "root": str(place.root), "config": str(place.config),
                "skill": str(place.skill), "changed": bool(self.written), "written": self.written,
                "entry": {ENTRY: self.want.entry}, "toolTimeoutSec": self.want.timeout,
                "machineSpecific": self.machine, "trusted": place.trusted()}

    def tell(self) -> None:
        place, want = self.place, self.want
        where = f"{place.scope} scope, {place.root}"
        if not self.written:
            print(f"mcpx: already installed for Codex ({where}); nothing changed")
        else:
            print(f"mcpx: installed for Codex ({where})")
            print(f"  {place.shown(place.config):<36} [{MCP_KEY}.{ENTRY}] runs `{shlex.join(want.command)}`, "
                  f"tool_timeout_sec = {want.timeout} (the longest question's TTL in mcpx's config + "
                  f"{TIMEOUT_MARGIN} s)")
            print(f"  {place.shown(place.skill / 'SKILL.md'):<36} the mcpx-elicitation skill")
        if self.machine:
            print(f"mcpx: the entry names this machine's mcpx ({want.command[0]}), not one on PATH. Put this one on "
                  "PATH and install again to get a file anyone can commit.")
        if not place.trusted():
            print(f"mcpx: Codex reads {place.shown(place.config)} only in a project you trust: answer its question "
                  f"when it first starts here, or add [projects.\"{place.root}\"] trust_level = \"trusted\" to your "
                  "~/.codex/config.toml")
        if self.written:
            print("Next: start (or restart) Codex; its tools are mcp__mcpx__SERVER_TOOL. `codex exec` runs no MCP "
                  f"tool that needs approval: add default_tools_approval_mode = \"approve\" to [{MCP_KEY}.{ENTRY}] "
                  "if you want it to. When you change a TTL in mcpx's config, install again: the timeout follows it.")


def apply(place: CodexPlace) -> CodexInstalled:
    """Install into `place`: the config read first (refused, nothing written), each file written only if it
    changes."""
    doc = read_toml(place.config)
    command, machine = serve_command()
    want = CodexWanted(command, longest_wait(Path.cwd(), "the tool timeout") + TIMEOUT_MARGIN)
    return CodexInstalled(place, want, machine, put_entry(ConfigToml(), place, doc, want.entry))


def _uninstall(args: argparse.Namespace, place: CodexPlace) -> int:
    return take_entry(args, ConfigToml(), place)


install = installer(CodexPlace.of, apply, _uninstall)
