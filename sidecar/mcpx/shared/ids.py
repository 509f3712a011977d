"""Identifiers mcpx mints: `elc-` questions, `cal-` calls, `tsk-` tasks, `dmn-` daemons — 16 lowercase hex each."""

import os
import re
import threading

HEX = "[0-9a-f]{16}"
_ID = re.compile(rf"^(elc|cal|tsk|dmn)-{HEX}$")


def pattern(prefix: str) -> str:
    """The regular expression of one kind of id, for documents that describe them (openapi.json)."""
    return f"^{prefix}-{HEX}$"


class _Entropy:
    """os.urandom in 4 KiB helpings: a getrandom call per id costs more than the rest of opening a question. Taken
    from an offset into the helping, not by slicing off what is left (a copy of up to 4 KiB per id: two per call)."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Drop the helping: a fork's child would otherwise mint the ids its parent and its other children mint."""
        self._pool = b""
        self._at = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bytes:
        with self._lock:
            at = self._at
            if at + n > len(self._pool):
                self._pool, at = os.urandom(4096), 0
            self._at = at + n
            return self._pool[at:at + n]


_entropy = _Entropy()
# a forked process (the tests' daemons are forks of one that imported mcpx) draws its own; os.fork takes no lock
os.register_at_fork(after_in_child=_entropy.forget)


def new_id(prefix: str) -> str:
    return f"{prefix}-{_entropy.take(8).hex()}"


def call_ids() -> tuple[str, str]:
    """A call's two ids, its task's (`tsk-`) and its trace's (`cal-`), from one take: every call mints both."""
    drawn = _entropy.take(16).hex()
    return f"tsk-{drawn[:16]}", f"cal-{drawn[16:]}"


def is_id(value: str, prefix: str) -> bool:
    match = _ID.match(value)
    return match is not None and match.group(1) == prefix
