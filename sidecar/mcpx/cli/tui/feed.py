"""The pending questions, kept current from the daemon's event stream (never by polling).

On the first connection the stream's opening frame says where the log stands; the pending list is
read once after it, and every later elicit.* event is applied on top. When the stream ends (the
daemon restarts, or this client fell behind) it reconnects with Last-Event-ID, and the daemon
replays what was missed from its audit log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from mcpx.broker.models import Elicitation
from mcpx.client.daemon_client import DaemonClient
from mcpx.client.transport import ApiError, NoDaemon

ENDED = ("elicit.answered", "elicit.expired", "elicit.abandoned")
CHANGED = ("elicit.open", "elicit.escalated", "elicit.resumed")
RETRY_FIRST, RETRY_MOST = 0.5, 5.0  # seconds between reconnects: doubling, bounded


@dataclass
class ShownQuestion:
    """A question on show, and when (on this machine's monotonic clock) it runs out."""

    question: Elicitation
    deadline: float

    @classmethod
    def of(cls, question: Elicitation) -> ShownQuestion:
        return cls(question, time.monotonic() + question.seconds_left)

    def seconds_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


@dataclass
class ShownEnd:
    """What the stream said when a question on show ended: its kind and the record's data."""

    id: str
    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        action, by = self.data.get("action"), self.data.get("by")
        if self.kind == "elicit.abandoned":
            return "abandoned"
        if self.kind == "elicit.expired":
            return "expired (answered cancel)"
        return f"{action} by {by}" if action else "answered"


@dataclass
class Listener:
    """Where the feed reports: the inbox's own methods, called on the event loop that runs the feed."""

    reset: Callable[[list[ShownQuestion]], None]
    upsert: Callable[[ShownQuestion], None]
    ended: Callable[[ShownEnd], None]
    link: Callable[[bool, str], None]  # (live?, what is going on)


class Feed:
    def __init__(self, client: DaemonClient, listener: Listener, session: str | None = None,
                 server: str | None = None) -> None:
        self.client = client
        self.listener = listener
        self.session = session
        self.server = server
        self.last: int | None = None  # the last event id seen: where a reconnect resumes
        self.known: set[str] = set()

    def wanted(self, q: Elicitation) -> bool:
        return q.state == "pending" and (self.server is None or q.server == self.server)

    async def run(self) -> None:
        """Follow the stream until cancelled, reconnecting after every end."""
        delay = RETRY_FIRST
        while True:
            try:
                async for event_id, event, data in self.client.events("elicit", self.session, self.last):
                    if event_id is not None and not event:  # the opening frame: where the log stands
                        if self.last is None:
                            await self._snapshot()
                        self.last = event_id
                        self.listener.link(True, "live")
                        delay = RETRY_FIRST
                        continue
                    await self._apply(event, data if isinstance(data, dict) else {})
                    if event_id is not None:
                        self.last = event_id
                self.listener.link(False, "the event stream ended; reconnecting")
            except NoDaemon as exc:
                self.listener.link(False, f"{exc}; retrying")
            except ApiError as exc:
                self.listener.link(False, f"the daemon refused the event stream: {exc}; retrying")
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:  # the daemon went away mid-stream
                self.listener.link(False, f"the event stream broke ({exc.__class__.__name__}); reconnecting")
            await asyncio.sleep(delay)
            delay = min(RETRY_MOST, delay * 2)

    async def _snapshot(self) -> None:
        body = await self.client.get("/v1/elicit", params={"state": "pending", "session": self.session,
                                                            "server": self.server, "limit": 10000})
        shown = [ShownQuestion.of(q) for q in map(Elicitation.model_validate, body["elicitations"]) if self.wanted(q)]
        self.known = {p.question.id for p in shown}
        self.listener.reset(shown)

    async def _apply(self, event: str, record: dict[str, Any]) -> None:
        eid = record.get("elicit")
        if not isinstance(eid, str):
            return
        if event in ENDED:
            if eid in self.known:
                self.known.discard(eid)
                data = record.get("data")
                self.listener.ended(ShownEnd(eid, event, data if isinstance(data, dict) else {}))
            return
        if event not in CHANGED:
            return
        # the event carries no question: read it now (if it has ended since, its end event follows)
        q = await self.fetch(eid)
        if q is not None and self.wanted(q):
            self.known.add(eid)
            self.listener.upsert(ShownQuestion.of(q))

    async def fetch(self, eid: str) -> Elicitation | None:
        try:
            body = await self.client.get(f"/v1/elicit/{eid}")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return Elicitation.model_validate(body["elicitation"])
