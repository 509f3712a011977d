"""Codex CLI's config (0.169.0): where it is, for a project and for the user, read and written as TOML that keeps
the person's comments and layout (tomlkit: docs/choices.md).

- User scope: `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), its `[mcp_servers.NAME]` tables; skills in
  `$CODEX_HOME/skills/`.
- Project scope: the project's `.codex/config.toml`, which Codex reads only in a project the person trusts
  (`[projects."DIR"] trust_level = "trusted"` in the user's config, which its first run in a folder asks about);
  skills in `.codex/skills/`. Both seen with `codex mcp list --json` and a scripted model's requests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.toml_document import TOMLDocument

from mcpx.cli.hosts import host_entry
from mcpx.cli.hosts.host_entry import Scope
from mcpx.cli.hosts.host_files import HostConfigError, write_if_changed
from mcpx.system.assets import SKILL

DOC = "docs/codex.md"
MCP_KEY = "mcp_servers"


def codex_home() -> Path:
    """Codex's own directory: $CODEX_HOME, else ~/.codex."""
    if explicit := os.environ.get("CODEX_HOME"):
        return Path(explicit).expanduser()
    return Path.home() / ".codex"


def read_toml(path: Path) -> TOMLDocument:
    """The TOML document in `path` (empty when it is missing), with its comments and layout; one that does not parse
    is refused, untouched."""
    if not path.exists():
        return tomlkit.document()
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except TOMLKitError as exc:
        raise HostConfigError(f"{path}: not valid TOML ({exc}); fix it first") from None


def plain(value: Any) -> Any:
    """A TOML item as plain Python data (a table as a dict, an array as a list)."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def write_toml(path: Path, doc: TOMLDocument) -> bool:
    """Write `doc` to `path` whole, if it changes it; whether it did."""
    return write_if_changed(path, tomlkit.dumps(doc))


@dataclass(frozen=True)
class CodexPlace(host_entry.Place):
    """Where install writes, for a scope: Codex's config.toml and skills folder."""

    @staticmethod
    def of(scope: Scope, cwd: Path | None = None) -> CodexPlace:
        if scope == "user":
            home = codex_home()
            return CodexPlace(scope, home, home / "config.toml", home / "skills" / SKILL)
        root = (cwd or Path.cwd()).resolve()
        return CodexPlace(scope, root, root / ".codex" / "config.toml", root / ".codex" / "skills" / SKILL)

    def trusted(self) -> bool:
        """Codex reads this project's config: the user's config trusts the project (or a folder above it)."""
        if self.scope == "user":
            return True
        projects = read_toml(codex_home() / "config.toml").get("projects")
        if not isinstance(projects, dict):
            return False
        for folder in (self.root, *self.root.parents):
            entry = projects.get(str(folder))
            if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
                return True
        return False
