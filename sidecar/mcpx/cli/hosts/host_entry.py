"""What installing mcpx into a host with one config file of MCP entries shares (Codex CLI's TOML, Gemini CLI's JSON):
where a scope writes (`Place`), an entry that runs `mcpx serve` recognised, and the flow of install and uninstall.

The file is read first (one that does not parse is refused, and nothing is written), mcpx's entry is put in or taken
out, and the file is written only when that changes it. What install created (the file, the servers' table) is
remembered (`Created`), so that uninstall removes exactly that once it is left empty. The skill goes beside it. How
a host's file reads, holds the entry and is written is its own module's (`EntryFile`: cli/hosts/codex_install.py,
cli/hosts/gemini_install.py).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from mcpx.cli.hosts.host_cmd import undone
from mcpx.cli.hosts.host_files import Created, prune, put_skill, runs_mcpx, take_skill

Scope = Literal["project", "user"]
D = TypeVar("D")


@dataclass(frozen=True)
class Place:
    """Where install writes, for a scope."""

    scope: Scope
    root: Path  # what paths are shown relative to, and the highest folder uninstall may leave empty
    config: Path  # the host's file that holds its MCP entries
    skill: Path

    def shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def is_mcpx_entry(entry: Any) -> bool:
    """An MCP entry (`command`, `args`) that runs `mcpx serve`, as install writes it, from any installation."""
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args", [])
    return isinstance(command, str) and isinstance(args, list) and runs_mcpx([command, *map(str, args)], "serve")


class EntryFile(Protocol[D]):
    """A host's config file, as install and uninstall edit it; `D` is the file's contents as read."""

    host: str  # the host's name in `Created`'s records
    servers_key: str  # the top-level key of its MCP entries, each a table (an object) by name
    entry: str  # mcpx's entry's name among them
    label: str  # the host's name for a person
    entry_shown: str  # mcpx's entry, as the file names it

    def read(self, path: Path) -> D: ...

    def with_entry(self, doc: D, entry: dict[str, Any], created: list[str]) -> D:
        """`doc` with mcpx's entry as wanted (the person's own keys in it kept); what it creates noted in
        `created`."""
        ...

    def editable(self, doc: D) -> D:
        """`doc` as uninstall may change it: itself where it is edited in place, else a copy."""
        ...

    def is_empty(self, doc: D) -> bool: ...

    def write(self, path: Path, before: D, after: D) -> bool:
        """Write `after` when it differs from what the file holds (`before`, as read); whether it did."""
        ...


def put_entry(file: EntryFile[D], place: Place, doc: D, entry: dict[str, Any]) -> list[str]:
    """mcpx's entry into the file (`doc`, as read) and the skill beside it; the files written, as shown."""
    record = Created(file.host)
    created = [] if place.config.exists() else [""]
    written: list[str] = []
    if file.write(place.config, doc, file.with_entry(doc, entry, created)):
        record.note(place.config, created)
        written.append(place.shown(place.config))
    if put_skill(place.skill):
        written.append(place.shown(place.skill / "SKILL.md"))
    record.save()
    return written


def without(file: EntryFile[D], doc: D, created: set[str]) -> D | None:
    """`doc` less mcpx's entry (only while it runs `mcpx serve`), and less the servers' table when install created it
    and it is left empty; None when it holds no entry of mcpx's."""
    after = file.editable(doc)
    servers = after.get(file.servers_key) if isinstance(after, dict) else None
    if not isinstance(after, dict) or not isinstance(servers, dict) or not is_mcpx_entry(servers.get(file.entry)):
        return None
    del servers[file.entry]
    if not servers and file.servers_key in created:
        del after[file.servers_key]
    return after


def take_entry(args: argparse.Namespace, file: EntryFile[D], place: Place) -> int:
    """`mcpx HOST install --uninstall`: mcpx's entry (only while it runs `mcpx serve`) and the skill taken out, the
    file removed when install created it and it is left empty; said."""
    doc = file.read(place.config)
    record = Created(file.host)
    created = record.of(place.config)
    files: list[str] = []
    deleted = False
    after = without(file, doc, created)
    if after is not None:
        files.append(place.shown(place.config))
        if file.is_empty(after) and "" in created:
            place.config.unlink()
            deleted = True
        else:
            file.write(place.config, doc, after)
        record.forget(place.config)
    if take_skill(place.skill, place.root):
        files.append(place.shown(place.skill / "SKILL.md"))
    prune(place.config.parent, place.root)  # a project's .codex/ or .gemini/, once empty (a user's: its root)
    record.save()
    return undone(args, file.label, place.scope, place.root, file.entry_shown, files,
                  [place.shown(place.config)] if deleted else [])
