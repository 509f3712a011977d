"""The inbox's secrets: the token that signs a browser in, and each question's link.

Both are derived (HMAC-SHA256) from one random key kept in the state directory (0600), so a link sent to a
phone and a browser signed in stay good across a daemon restart, and nothing per question is stored: a link
is good exactly as long as its question is pending, because every use checks the question. Deleting the key
file and restarting the daemon revokes every token and link at once.

The secrets never reach a log: they are checked here, in constant time, and never formatted into a message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from mcpx.system.paths import StatePaths, load_key


def key_path(paths: StatePaths) -> Path:
    return paths.root / "inbox.key"


def _derive(key: bytes, purpose: str) -> str:
    digest = hmac.new(key, purpose.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def person_in(link: str | None) -> str | None:
    """The approver a link names (unchecked: `InboxKeys.approver_of` checks it), or None for a question's own link."""
    return link.rpartition(".")[0] or None if link and "." in link else None


@dataclass(frozen=True)
class InboxKeys:
    key: bytes

    @classmethod
    def load(cls, paths: StatePaths) -> InboxKeys:
        return cls(load_key(key_path(paths)))

    @property
    def token(self) -> str:
        """What signs a browser in to the whole inbox (its cookie's value)."""
        return _derive(self.key, "inbox-token")

    def link_secret(self, eid: str) -> str:
        """What opens one question, and nothing else."""
        return _derive(self.key, f"link:{eid}")

    def approver_link(self, eid: str, person: str) -> str:
        """What opens one question as one approver: their name, a dot, and a secret for that pair alone. The link
        is the person (docs/approvals.md): it counts once, and never as anyone else."""
        return f"{person}.{_derive(self.key, f'approver:{eid}:{person}')}"

    def approver_of(self, eid: str, given: str | None) -> str | None:
        """The approver whose link `given` is for question `eid`, or None if it is no approver's link."""
        person = person_in(given)
        if person is None or given is None:
            return None
        return person if hmac.compare_digest(given.encode(), self.approver_link(eid, person).encode()) else None

    def token_ok(self, given: str | None) -> bool:
        return given is not None and given != "" and hmac.compare_digest(given.encode(), self.token.encode())

    def link_ok(self, eid: str, given: str | None) -> bool:
        return given is not None and given != "" and hmac.compare_digest(given.encode(),
                                                                         self.link_secret(eid).encode())
