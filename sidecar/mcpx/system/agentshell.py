"""What marks an agent's shell, and whether a process is one or descends from one.

opencode puts `AGENT=1`, `OPENCODE=1` and `OPENCODE_PID` into its own environment as it starts (its
CLI's start-up middleware; seen in the 1.18.33 binary), so every process it starts inherits them: the
shells of its bash tool, the person's `!` commands, its MCP servers. opencode's own process does not
carry them in the environment it was started with, which is what /proc shows of it — so the plugin,
which runs inside opencode, is not marked, and everything opencode runs is.

Claude Code does the same with `CLAUDECODE=1` (and `CLAUDE_CODE_SESSION_ID`, `CLAUDE_CODE_ENTRYPOINT`): its Bash
tool's shells, its hooks and its MCP servers carry it; the `claude` process a person starts does not.

`AGENT` is also the name other agent hosts use for the same purpose, so any non-empty value but "0"
counts. `MCPX_SESSION_ID` (which the plugin adds to opencode's shells) does not: a person may set it
in their own terminal to act for a session.

A process's environment and parent are read from /proc (Linux). The same user can read them for
every process of theirs; a process that can read nothing there is not judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mcpx.shared.errors import McpxError

PROC = Path("/proc")
MAX_DEPTH = 128  # a parent chain is a few dozen processes; a longer one is not walked further


MARKS = ("AGENT", "OPENCODE", "CLAUDECODE")  # the variables mark_of reads


def unmarked(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the variables that mark an agent's environment: for a process that is nobody's agent though an
    agent's shell started it (the daemon: what its servers start would otherwise descend from a marked process)."""
    return {name: value for name, value in env.items() if name not in MARKS}


def mark_of(env: Mapping[str, str]) -> str | None:
    """The variable that marks this environment as an agent's (`AGENT=1`), or None."""
    agent = env.get("AGENT")
    if agent and agent != "0":
        return f"AGENT={agent}"
    if env.get("OPENCODE") == "1":
        return "OPENCODE=1"
    if env.get("CLAUDECODE") == "1":
        return "CLAUDECODE=1"
    return None


@dataclass(frozen=True)
class Marked:
    """A process whose environment marks it as an agent's: the one asking, or one of its ancestors."""

    pid: int
    name: str
    mark: str
    generations: int  # 0: the process itself; 1: its parent; …

    def describe(self) -> str:
        if self.generations == 0:
            return f"it runs with {self.mark} (pid {self.pid}, {self.name})"
        return f"it descends from a process that runs with {self.mark} (pid {self.pid}, {self.name})"


class ProcessUnseen(McpxError):
    """/proc has no entry for the process (it is gone, or in another pid namespace)."""


def proc_available() -> bool:
    return (PROC / "self" / "stat").exists()


def _stat(pid: int) -> tuple[str, int]:
    """(name, parent pid). The name is in parentheses and may hold spaces and parentheses itself."""
    text = (PROC / str(pid) / "stat").read_text(errors="replace")
    close = text.rfind(")")
    name = text[text.find("(") + 1:close]
    return name, int(text[close + 2:].split()[1])


def environment(pid: int) -> dict[str, str] | None:
    """The environment the process was started with; None when it may not be read (another user's)."""
    try:
        data = (PROC / str(pid) / "environ").read_bytes()
    except (PermissionError, ProcessLookupError, FileNotFoundError):
        return None
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            out[name.decode(errors="replace")] = value.decode(errors="replace")
    return out


def marked_lineage(pid: int) -> Marked | None:
    """The nearest process, from `pid` up through its parents, whose environment marks it as an agent's.

    Raises ProcessUnseen when `pid` itself has no /proc entry: such a process cannot be judged.
    """
    current, generations = pid, 0
    while current > 1 and generations < MAX_DEPTH:
        try:
            name, parent = _stat(current)
        except (FileNotFoundError, ProcessLookupError):
            if generations == 0:
                raise ProcessUnseen(f"no process {pid} under {PROC}") from None
            return None  # an ancestor ended while we looked: the chain above it is gone
        except (OSError, ValueError, IndexError):
            return None
        env = environment(current)
        if env is not None and (mark := mark_of(env)) is not None:
            return Marked(current, name, mark, generations)
        current, generations = parent, generations + 1
    return None
