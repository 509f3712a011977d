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
    """os.urandom in 4 KiB helpings: a getrandom call per id costs more than the rest of opening a question."""

    def __init__(self) -> None:
        self._pool = b""
        self._lock = threading.Lock()

    def take(self, n: int) -> bytes:
        with self._lock:
            if len(self._pool) < n:
                self._pool = os.urandom(4096)
            out, self._pool = self._pool[:n], self._pool[n:]
            return out


_entropy = _Entropy()


def new_id(prefix: str) -> str:
    return f"{prefix}-{_entropy.take(8).hex()}"


def is_id(value: str, prefix: str) -> bool:
    match = _ID.match(value)
    return match is not None and match.group(1) == prefix
