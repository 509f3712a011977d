"""Claude Code's config files (2.1.332): where they are, for a project and for the user.

- Project scope: `.mcp.json` in the project (its `mcpServers`, shared with the project), `.claude/settings.json`
  (its hooks), `.claude/settings.local.json` (this person's approvals of the project's servers, not committed) and
  `.claude/skills/`.
- User scope: `~/.claude.json` (its top-level `mcpServers`; its `projects[DIR].mcpServers` are the "local" scope,
  one person's servers in one project, DIR being the project's git root, else the directory itself) and
  `~/.claude/` (settings.json, skills/). `CLAUDE_CONFIG_DIR` moves both: `$CLAUDE_CONFIG_DIR/.claude.json` and
  `$CLAUDE_CONFIG_DIR/settings.json` (seen with `claude mcp add -s user` and the binary's own code).

All are plain JSON, read and written as cli/hosts/host_files.py does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcpx.cli.hosts import host_files
from mcpx.system.assets import SKILL

Scope = Literal["project", "user"]
DOC = "docs/claude-code.md"
MCP_KEY = "mcpServers"


def read_json(path: Path) -> dict[str, Any]:
    return host_files.read_json(path, DOC)


def config_dir() -> Path:
    """Claude Code's own directory: $CLAUDE_CONFIG_DIR, else ~/.claude."""
    if explicit := os.environ.get("CLAUDE_CONFIG_DIR"):
        return Path(explicit).expanduser()
    return Path.home() / ".claude"


def user_file() -> Path:
    """Claude Code's user state, whose `mcpServers` is its user scope: ~/.claude.json (in $CLAUDE_CONFIG_DIR when
    set)."""
    if explicit := os.environ.get("CLAUDE_CONFIG_DIR"):
        return Path(explicit).expanduser() / ".claude.json"
    return Path.home() / ".claude.json"


def project_key(cwd: Path) -> str:
    """The key of a project in ~/.claude.json's `projects`: its git root, else the directory itself."""
    for directory in [cwd, *cwd.parents]:
        if (directory / ".git").exists():
            return str(directory)
    return str(cwd)


@dataclass(frozen=True)
class ClaudePlace:
    """Where install writes, for a scope."""

    scope: Scope
    root: Path  # what paths are shown relative to, and the highest folder uninstall may leave empty
    mcp: Path
    settings: Path
    approvals: Path | None  # the project's approvals of its .mcp.json servers: project scope only
    skill: Path

    @staticmethod
    def of(scope: Scope, cwd: Path | None = None) -> ClaudePlace:
        if scope == "user":
            own = config_dir()
            root = own if os.environ.get("CLAUDE_CONFIG_DIR") else Path.home()
            return ClaudePlace(scope, root, user_file(), own / "settings.json", None, own / "skills" / SKILL)
        root = (cwd or Path.cwd()).resolve()
        dot = root / ".claude"
        return ClaudePlace(scope, root, root / ".mcp.json", dot / "settings.json", dot / "settings.local.json",
                     dot / "skills" / SKILL)

    def shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)
