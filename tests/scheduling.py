"""How `--dist loadgroup` (./dev test) hands the suite's work to its workers: xdist's own scheduler, with the real
hosts' tests (tests/hosts/) kept to lanes of their own.

A host's test mostly waits: for a Node or Rust program to start, for a scripted model's turn, for a TUI to draw, for
a question's short TTL. Measured with each module alone (-n 0, the whole process tree's CPU, at load ~10):
claude_print 37 s of CPU in 93 s, codex_exec 18 s in 52 s, gemini_headless 27 s in 92 s, opencode_e2e 118 s in
375 s: a third of a core each. When every worker took host tests at once, as the order alone made them (the host
groups first, so that none of them was started last), two cores did a core's work for the first minutes of a run.
Here at most `host_lanes` workers hold host tests at a time, longest first, and the others take the rest of the
suite from the start; once the rest is handed out, every worker takes host tests."""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadGroupScheduling

HOSTS = "tests/hosts/"


def host_lanes(workers: int) -> int:
    """How many workers may hold host tests at once: half of them, rounded up (2 of 3, 2 of 4, 1 of 2)."""
    return max(1, (workers + 1) // 2)


class HostLanes(LoadGroupScheduling):
    """xdist's loadgroup (a work unit is an xdist_group's tests, or one test), handed out in the order the workers
    collected it (pytest_collection_modifyitems), but a host test's unit goes only to a worker already in a host
    lane, or to one that opens a lane while fewer than host_lanes are open."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self.host_scopes: set[str] | None = None

    def _is_host(self, scope: str) -> bool:
        if self.host_scopes is None:
            self.host_scopes = {self._split_scope(n) for n in self.collection or () if n.startswith(HOSTS)}
        return scope in self.host_scopes

    def _holds_host(self, node: Any) -> bool:
        return any(self._is_host(scope) and not all(unit.values())
                   for scope, unit in self.assigned_work.get(node, {}).items())

    def _next_scope(self, node: Any) -> str:
        first_host = next((s for s in self.workqueue if self._is_host(s)), None)
        first_other = next((s for s in self.workqueue if not self._is_host(s)), None)
        if first_host is not None:
            lanes = sum(self._holds_host(n) for n in self.nodes if n is not node)
            if first_other is None or self._holds_host(node) or lanes < host_lanes(len(self.nodes)):
                return first_host
        assert first_other is not None
        return first_other

    def _assign_work_unit(self, node: Any) -> None:
        """xdist's own, but for which unit: _next_scope's, not always the first."""
        assert self.workqueue
        scope = self._next_scope(node)
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collected = self.registered_collections[node]
        node.send_runtest_some([collected.index(nodeid) for nodeid, done in work_unit.items() if not done])
