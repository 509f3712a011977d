"""What `mcpx opencode import` and `mcpx claude import` share: moving a host's MCP servers into mcpx's config.

A host starts a stdio server with its own whole environment plus the entry's; mcpx gives a server a small safe set
plus its `env` (config/environment.py). So that what worked keeps working, each host's `convert` writes the
references the host filled as `${NAME}` in `env`, refuses what mcpx cannot fill (`Unimportable`: the entry stays
in the host, with the reason), and `namesakes` passes through every variable set here whose name starts with a
word of the server's name (GITHUB_TOKEN for github, BRAVE_API_KEY for brave-search).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpx.cli.hosts import host_files
from mcpx.cli.hosts.host_files import write_json
from mcpx.config.environment import INHERITED, references
from mcpx.config.environment import inherited as environment_inherited
from mcpx.shared.errors import McpxError

_GENERIC = {"mcp", "mcpx", "opencode", "claude", "server", "servers", "local", "remote", "the", "api", "app"}


class Unimportable(McpxError):
    """An entry mcpx cannot run as its host does; the message says why and what to do."""


@dataclass
class ImportReport:
    moved: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    passed: dict[str, list[str]] = field(default_factory=dict)  # server → variables its env passes through


def _name_words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", name.lower()) if len(w) >= 3 and w not in _GENERIC}


def namesakes(name: str, env: dict[str, str], environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """`env` plus a pass-through of each variable set in `environ` named like the server; and every variable the
    result passes through."""
    out = dict(env)
    words = _name_words(name)
    inherited = set(environment_inherited(environ))
    for var in sorted(environ):
        if var not in out and var not in inherited and var.split("_", 1)[0].lower() in words:
            out[var] = "${" + var + "}"
    return out, sorted({ref for value in out.values() for ref in references(value)})


def _unrunnable(name: str, entry: Any, origin: str) -> str | None:
    """Why mcpx could not run this entry, in the words of the shape it has."""
    from mcpx.config.finding import validate
    from mcpx.config.problems import ConfigError

    try:
        validate({"servers": {name: entry}}, origin)
        return None
    except ConfigError as exc:
        return exc.problem + (f" ({exc.field})" if exc.field else "")


Convert = Callable[[str, Any], tuple[Any, list[str]]]  # an entry as mcpx's config takes it; what it passes through


def move(host: str, candidates: Mapping[str, Any], convert: Convert, origin: Mapping[str, Path], target: Path,
         doc: str) -> ImportReport:
    """Write the candidates mcpx can run as their host does into mcpx's config at `target`; the host's files are
    the caller's to change (after this, so that a failure leaves a server in both rather than in neither)."""
    from mcpx.config.models import data_servers

    config = host_files.read_json(target, doc)
    existing = data_servers(config)
    report = ImportReport()
    servers = dict(config.get("servers") or {})
    for name, original in candidates.items():
        try:
            entry, passed = convert(name, original)
        except Unimportable as exc:
            report.skipped[name] = f"mcpx cannot run it as {host} does: {exc}"
            continue
        if name in existing:
            if existing[name] in (entry, original):
                report.moved.append(name)  # already behind mcpx, as it is here
            else:
                report.skipped[name] = f"mcpx's config ({target}) already has a different server named {name!r}"
            continue
        if (problem := _unrunnable(name, entry, str(origin[name]))) is not None:
            report.skipped[name] = f"mcpx cannot run it as it is: {problem}"
            continue
        servers[name] = entry
        report.moved.append(name)
        if isinstance(entry, dict) and "command" in entry:
            report.passed[name] = passed
    if report.moved and servers != (config.get("servers") or {}):
        write_json(target, {**config, "servers": servers})
    return report


def tell(host: str, report: ImportReport, origin: Mapping[str, Path], target: Path,
         tool_name: Callable[[str], str], saw: str = "all of yours") -> None:
    """The report, for a person: what moved where (and what each server now gets, against what it saw of the
    environment under its host), what stayed and why."""
    for name in report.moved:
        print(f"mcpx: moved {name!r} from {origin[name]} into {target}; its tools now reach the model as "
              f"{tool_name(name)}")
        if name in report.passed:
            names = ", ".join(report.passed[name]) or "nothing else"
            print(f"  it gets {', '.join(INHERITED[:6])}, the locale and its environment entries, passing through "
                  f"{names} from the daemon's environment; under {host} it saw {saw} — if it needs "
                  f'another variable, add "NAME": "${{NAME}}" to its env in {target}')
    for name, why in report.skipped.items():
        print(f"mcpx: left {name!r} in {origin[name]}: {why}", file=sys.stderr)
