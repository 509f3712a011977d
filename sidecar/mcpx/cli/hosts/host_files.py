"""What installing mcpx into a host (opencode, Claude Code) shares: its config files read and written as plain JSON
(a file with comments is refused, never rewritten without them), atomically and only when they change; the command
that runs this mcpx; where `import` puts the servers it moves; and the error a person must fix."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpx.cli.common import emit_json
from mcpx.config import jsonc
from mcpx.shared.errors import McpxError


class HostConfigError(McpxError):
    """Something the person must fix in a host's config; the message names the file and what to do."""


def mcpx_config(cwd: Path | None = None) -> Path:
    """Where `import` puts the servers it moves: $MCPX_CONFIG, else the project's .mcpx/config.json."""
    if explicit := os.environ.get("MCPX_CONFIG"):
        return Path(explicit).expanduser()
    return (cwd or Path.cwd()).resolve() / ".mcpx" / "config.json"


def copied(data: Any) -> Any:
    """A deep copy of JSON data, keys in their order."""
    return json.loads(json.dumps(data))


# ---- reading and writing comment-free JSON


def read_json(path: Path, doc: str) -> dict[str, Any]:
    """The JSON object in `path` ({} when it is missing or empty); `doc` is where the person reads how to add
    mcpx's entries by hand when the file has comments."""
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
            raise HostConfigError(f"{path}: not valid JSON ({exc}); fix it first") from None
        raise HostConfigError(f"{path} has comments or trailing commas; mcpx writes plain JSON and would lose them. "
                              f"Remove them, or add the entries by hand (see {doc})") from None
    if not isinstance(data, dict):
        raise HostConfigError(f"{path}: the top level must be a JSON object")
    return data


def write_text(path: Path, text: str) -> None:
    """Write `path` whole or not at all: a reader (the host, starting) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_if_changed(path: Path, text: str) -> bool:
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    write_text(path, text)
    return True


def prune(folder: Path, root: Path) -> None:
    """Remove `folder` and the folders above it, below `root`, that are left empty (install made them)."""
    while folder != root and root in folder.parents and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


# ---- this mcpx, as a host runs it


def serve_command() -> tuple[list[str], bool]:
    """The MCP entry's command, and whether it names this machine's paths: `mcpx serve` when the mcpx on PATH is this
    very installation, else this installation's own console script (or this Python with -m mcpx)."""
    script = Path(sys.executable).parent / "mcpx"
    on_path = shutil.which("mcpx")
    if script.is_file() and on_path and Path(on_path).resolve() == script.resolve():
        return ["mcpx", "serve"], False
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "serve"], True
    return [sys.executable, "-m", "mcpx", "serve"], True


def runs_mcpx(argv: list[str], *tail: str) -> bool:
    """`argv` runs `mcpx TAIL…` (as install writes it, from any installation)."""
    if len(argv) <= len(tail) or argv[len(argv) - len(tail):] != list(tail):
        return False
    head = [str(c) for c in argv[:len(argv) - len(tail)]]
    return Path(head[0]).name == "mcpx" or head[-2:] == ["-m", "mcpx"]


def shell_words(command: str) -> list[str]:
    """A shell command line's words; none when it does not split (an unclosed quote)."""
    try:
        return shlex.split(command)
    except ValueError:
        return []


def guarded(host: str, body: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A `mcpx HOST …` command, with a config the person must fix said as such (exit 1)."""
    def runner(args: argparse.Namespace) -> int:
        try:
            return int(body(args))
        except HostConfigError as exc:
            if args.json:
                emit_json({"error": {"code": f"{host}_config", "message": str(exc)}})
            else:
                print(f"mcpx {host}: {exc}", file=sys.stderr)
            return 1
    return runner
