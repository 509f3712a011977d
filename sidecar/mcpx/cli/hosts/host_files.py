"""What installing mcpx into a host (opencode, Claude Code) shares: its config files read and written as plain JSON
(a file with comments is refused, never rewritten without them), atomically and only when they change; the command
that runs this mcpx; where `import` puts the servers it moves; and the error a person must fix."""

from __future__ import annotations

import argparse
import json
import math
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
from mcpx.system.paths import state_dir


class HostConfigError(McpxError):
    """Something the person must fix in a host's config; the message names the file and what to do."""


def mcpx_config(cwd: Path | None = None) -> Path:
    """Where `import` puts the servers it moves: $MCPX_CONFIG, else the project's .mcpx/config.json."""
    if explicit := os.environ.get("MCPX_CONFIG"):
        return Path(explicit).expanduser()
    return (cwd or Path.cwd()).resolve() / ".mcpx" / "config.json"


def import_target(scope: str, cwd: Path) -> Path:
    """Where `import` puts the servers it moves: $MCPX_CONFIG, else the project's .mcpx/config.json, or with
    --scope user the user's own mcpx config."""
    from mcpx.config.finding import config_places

    return config_places(cwd)[0] if scope == "user" else mcpx_config(cwd)


def longest_wait(cwd: Path, what: str) -> int:
    """The longest a question can wait (s) in mcpx's config as it loads in `cwd`: its elicit.ttl, each server's,
    mcpx's own questions' askTimeout. A host's timeout for mcpx (`what`) is read from it."""
    from mcpx.config.finding import load_config
    from mcpx.config.problems import ConfigError

    try:
        config = load_config(cwd).config
    except ConfigError as exc:
        raise HostConfigError(f"mcpx's config does not load, and {what} is read from it: {exc}") from None
    ttls = [config.elicit.ttl, config.elicit.ask_timeout,
            *(s.elicit.ttl for s in config.servers.values() if s.elicit.ttl is not None)]
    return math.ceil(max(ttls))


def copied(data: Any) -> Any:
    """A deep copy of JSON data, keys in their order."""
    return json.loads(json.dumps(data))


class Created:
    """What a host's install created in each file (the file itself as "", an object or list as its keys joined by "/"):
    uninstall removes those once empty, and never an empty one the person had. Kept in mcpx's state directory;
    where it is lost, uninstall keeps every empty one."""

    def __init__(self, host: str) -> None:
        self.path = state_dir() / f"{host}-install.json"
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        self.data: dict[str, list[str]] = data if isinstance(data, dict) else {}
        self.before = copied(self.data)

    def of(self, file: Path) -> set[str]:
        return set(self.data.get(str(file), []))

    def note(self, file: Path, created: list[str]) -> None:
        if created:
            self.data[str(file)] = sorted(self.of(file) | set(created))

    def forget(self, file: Path) -> None:
        self.data.pop(str(file), None)

    def save(self) -> None:
        if self.data == self.before:
            return
        if self.data:
            write_json(self.path, self.data)
        elif self.path.exists():
            self.path.unlink()


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


# ---- the mcpx-elicitation skill, where a host reads skills


def put_skill(folder: Path) -> bool:
    """The skill's SKILL.md in `folder` (a host's skills/mcpx-elicitation/); whether it was written."""
    from mcpx.system.assets import missing_hint, skill_dir

    skill = skill_dir() / "SKILL.md"
    if not skill.is_file():
        raise HostConfigError(f"{skill} not found: {missing_hint()}")
    return write_if_changed(folder / "SKILL.md", skill.read_text(encoding="utf-8"))


def take_skill(folder: Path, root: Path) -> bool:
    """Remove the skill from `folder`, and the folders it leaves empty below `root`; whether it was there (a
    SKILL.md of another skill is not mcpx's)."""
    skill = folder / "SKILL.md"
    if not (skill.is_file() and "\nname: mcpx-elicitation\n" in skill.read_text(encoding="utf-8")):
        return False
    skill.unlink()
    prune(folder, root)
    return True
