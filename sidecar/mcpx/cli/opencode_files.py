"""opencode's config files: where they are, and reading and writing them as plain JSON (a file with comments is
refused, never rewritten without them)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcpx import jsonc
from mcpx.errors import McpxError

SCHEMA_URL = "https://opencode.ai/config.json"


class OpencodeError(McpxError):
    """Something the person must fix; the message names the file and what to do."""


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
