"""Finding the config files, reading and merging them, and the embedded default when there are none."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mcpx.config import jsonc
from mcpx.config.models import Config, data_servers
from mcpx.config.problems import ConfigError, Problem, problems_of
from mcpx.shared.names import DEMO_KEY_FILE

DEMO = "demo"


def demo_server() -> dict[str, Any]:
    """The bundled demo server's entry. Its questions wait an hour, not elicit.ttl's two minutes: the person
    answering the first one may still be reading the README."""
    # PYTHONPATH: servers inherit no PYTHONPATH, and mcpx may be run from a checkout rather than installed.
    # MCPX_DEMO_KEY_FILE, the daemon's own (it makes the key there): the demo signs its requestState with that key,
    # so a call waiting on it is answered after a restart (a key drawn per process refuses every re-driven call)
    here = str(Path(__file__).resolve().parents[2])  # sidecar/, where mcpx is
    return {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"],
            "env": {"PYTHONPATH": here, DEMO_KEY_FILE: "${" + DEMO_KEY_FILE + "}"}, "elicit": {"ttl": "1h"}}


def embedded_default() -> dict[str, Any]:
    """What mcpx runs with when no config file exists: SQLite state and the bundled demo server."""
    return {"servers": {DEMO: demo_server()}}


USER_CONFIG = Path("~/.config/mcpx/config.json")
PROJECT_CONFIG = Path(".mcpx/config.json")


def _user_config() -> Path:
    return Path(os.environ.get("MCPX_USER_CONFIG", str(USER_CONFIG))).expanduser()


def config_places(cwd: Path) -> list[Path]:
    """Every file that is a source of the config, or would be one if it were created: where to watch."""
    if explicit := os.environ.get("MCPX_CONFIG"):
        return [Path(explicit).expanduser()]
    return [_user_config(), *(directory / PROJECT_CONFIG for directory in [cwd, *cwd.parents])]


def config_sources(cwd: Path) -> list[Path]:
    """The files that make up the config, lowest precedence first."""
    if explicit := os.environ.get("MCPX_CONFIG"):
        return [Path(explicit).expanduser()]
    sources: list[Path] = []
    user = _user_config()
    if user.is_file():
        sources.append(user)
    for directory in [cwd, *cwd.parents]:
        candidate = directory / PROJECT_CONFIG
        if candidate.is_file():
            if candidate.resolve() != user.resolve():
                sources.append(candidate)
            break
    return sources


def unread_configs(sources: list[Path], state_root: Path) -> list[Problem]:
    """Config files that sit where people put one but mcpx never reads (the state directory `state_root`, ~/.mcpx/
    outside the directories searched), each a warning saying where mcpx reads. A newcomer's config there otherwise
    ends in the embedded default, and a puzzling refusal of the servers it names."""
    read = {p.resolve() for p in sources}
    places = [state_root / "config.json", Path("~/.mcpx/config.json").expanduser()]
    unread = [p for p in dict.fromkeys(places) if p.is_file() and p.resolve() not in read]
    where = (f"MCPX_CONFIG names {sources[0]}" if os.environ.get("MCPX_CONFIG") and sources else
             f"mcpx reads $MCPX_CONFIG, else {USER_CONFIG} under the nearest {PROJECT_CONFIG} of the working "
             "directory and its parents")
    return [Problem(str(p), None, f"this file is not read: {where}; move it there, or set MCPX_CONFIG={p}")
            for p in unread]


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


EMPTY = ('the file is empty (or only comments): write a JSON object, e.g. {"servers": {"NAME": {"command": "CMD", '
         '"args": ["ARG"]}}} ({} is a config with no servers), or remove the file')


def read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), None, "file not found") from None
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror}") from None
    try:
        data = jsonc.loads(text)
    except (ValueError, json.JSONDecodeError) as exc:
        if isinstance(exc, json.JSONDecodeError) and not exc.doc.strip():  # exc.doc: the text less its comments
            raise ConfigError(str(path), None, EMPTY) from None
        raise ConfigError(str(path), None, f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), None, "the top level must be a JSON object")
    return data


def validate(data: dict[str, Any], origin: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError.of(problems_of(exc, data, origin)) from None


@dataclass
class LoadedConfig:
    config: Config
    sources: list[Path]
    cwd: Path
    raw: dict[str, Any] = field(default_factory=dict)
    stamps: list[tuple[int, int, int] | None] = field(default_factory=list)  # the files as they were when read
    fallbacks: dict[str, str] = field(default_factory=dict, repr=False)

    def fallback_session(self, cwd: str | Path | None = None) -> str:
        """Which config, which working directory: the session of a caller that names none.

        Built from the config's file paths (not its content), so editing the config does not
        orphan the questions already asked.
        """
        key = str(cwd or self.cwd)
        if key not in self.fallbacks:
            ident = json.dumps([[str(p) for p in self.sources], key])
            self.fallbacks[key] = "fb-" + hashlib.sha256(ident.encode()).hexdigest()[:16]
        return self.fallbacks[key]

    @property
    def origin(self) -> str:
        return " + ".join(str(p) for p in self.sources) if self.sources else "(embedded default)"

    @property
    def directory(self) -> Path:
        """Where a relative path in an entry is read from: the config file's directory (the nearest file's when
        several make the config; the working directory for the embedded default)."""
        return self.sources[-1].parent if self.sources else self.cwd


def load_config(cwd: Path | None = None) -> LoadedConfig:
    cwd = (cwd or Path.cwd()).resolve()
    sources = config_sources(cwd)
    if os.environ.get("MCPX_CONFIG") and not sources[0].exists():
        raise ConfigError(str(sources[0]), None, "file not found (named by MCPX_CONFIG)")
    if not sources:
        raw = embedded_default()
        return LoadedConfig(validate(raw, "(embedded default)"), [], cwd, raw)
    stamps = file_stamps(sources)
    merged: dict[str, Any] = {}
    problems: list[Problem] = []
    for path in sources:
        # each file alone first, so a problem names the file it is in; every file's problems are told
        try:
            data = read_file(path)
            validate(data, str(path))
        except ConfigError as exc:
            problems += exc.problems
            continue
        normalised = dict(data)
        servers = data_servers(data)
        for key in ("mcpServers", "mcp"):
            normalised.pop(key, None)
        if servers:
            normalised["servers"] = servers
        merged = _deep_merge(merged, normalised)
    if problems:
        raise ConfigError.of(problems)
    config = validate(merged, " + ".join(map(str, sources)))
    return LoadedConfig(config, sources, cwd, merged, stamps)


def file_stamps(paths: list[Path]) -> list[tuple[int, int, int] | None]:
    out: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = path.stat()
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return out
