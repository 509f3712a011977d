"""How much memory an upstream process holds, with the processes it started (`npx` runs node under npm), from /proc."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass(frozen=True)
class Usage:
    rss_kib: int
    processes: int  # the process and its live descendants


def _parents(proc: Path) -> dict[int, int]:
    """{pid: parent pid} of every process we can see."""
    out: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # the command name in field 2 may hold spaces and ')': everything after the last ')' is fixed fields
            out[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return out


def _rss_kib(proc: Path, pid: int) -> int:
    try:
        return int((proc / str(pid) / "statm").read_text().split()[1]) * PAGE_KIB
    except (OSError, ValueError, IndexError):
        return 0


def usage(pids: list[int], proc: Path = Path("/proc")) -> dict[int, Usage]:
    """Resident memory of each process tree rooted at `pids`, from one walk of /proc; a pid gone is left out."""
    if not pids or not proc.is_dir():
        return {}
    children: dict[int, list[int]] = {}
    parents = _parents(proc)
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    out: dict[int, Usage] = {}
    for root in pids:
        if root not in parents:
            continue
        tree, todo = [], [root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, ()))
        out[root] = Usage(sum(_rss_kib(proc, p) for p in tree), len(tree))
    return out
