"""opencode's config files: where they are, and reading and writing them as plain JSON (cli/hosts/host_files.py: a file
with comments is refused, never rewritten without them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mcpx.cli.hosts import host_files
from mcpx.cli.hosts.host_files import HostConfigError, write_json

__all__ = ["SCHEMA_URL", "OpencodeError", "global_config_dir", "opencode_config", "read_json", "write_json"]

SCHEMA_URL = "https://opencode.ai/config.json"


class OpencodeError(HostConfigError):
    """Something the person must fix in opencode's config; the message names the file and what to do."""


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


def read_json(path: Path) -> dict[str, Any]:
    return host_files.read_json(path, "docs/opencode.md")
