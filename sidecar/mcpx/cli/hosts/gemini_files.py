"""Gemini CLI's settings (0.61.0): where they are, for a project and for the user.

- User scope: `~/.gemini/settings.json` (its `mcpServers`) and `~/.gemini/skills/`; `GEMINI_CLI_HOME` stands for the
  home directory when set (`$GEMINI_CLI_HOME/.gemini/…`), as Gemini CLI's own code reads it.
- Project scope: the project's `.gemini/settings.json` and `.gemini/skills/`.

In a folder the person has not trusted (`~/.gemini/trustedFolders.json`) Gemini CLI runs no MCP server at all, the
user's own included (`gemini mcp list` says "Disabled").

Plain JSON, read and written as cli/hosts/host_files.py does (a file with comments is refused, not rewritten
without them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpx.cli.hosts import host_entry, host_files
from mcpx.cli.hosts.host_entry import Scope
from mcpx.system.assets import SKILL

DOC = "docs/gemini.md"
MCP_KEY = "mcpServers"


def read_json(path: Path) -> dict[str, Any]:
    return host_files.read_json(path, DOC)


def gemini_dir() -> Path:
    """Gemini CLI's own directory: ~/.gemini, the home being $GEMINI_CLI_HOME when set."""
    return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()).expanduser() / ".gemini"


@dataclass(frozen=True)
class GeminiPlace(host_entry.Place):
    """Where install writes, for a scope: Gemini CLI's settings.json (`config`) and skills folder."""

    @staticmethod
    def of(scope: Scope, cwd: Path | None = None) -> GeminiPlace:
        if scope == "user":
            own = gemini_dir()
            return GeminiPlace(scope, own, own / "settings.json", own / "skills" / SKILL)
        root = (cwd or Path.cwd()).resolve()
        return GeminiPlace(scope, root, root / ".gemini" / "settings.json", root / ".gemini" / "skills" / SKILL)


def trusted(folder: Path) -> bool:
    """Gemini CLI runs MCP servers in `folder` (the project's and the user's own alike): trustedFolders.json trusts
    it or a folder above it (TRUST_PARENT trusts the folder the named one is in)."""
    try:
        folders = read_json(gemini_dir() / "trustedFolders.json")
    except host_files.HostConfigError:
        return False
    for named, level in folders.items():
        found = Path(named) if level == "TRUST_FOLDER" else Path(named).parent if level == "TRUST_PARENT" else None
        if found is not None and (found == folder or found in folder.parents):
            return True
    return False
