"""What the broker reads: pending questions from memory (the pending index, in step with the store), a question
answered through this daemon a moment ago from what its commit left (`recent`), everything else from the store.
"""

from __future__ import annotations

import time

from mcpx.broker.models import Answer, Elicitation, State, seconds_left
from mcpx.broker.pending import PendingIndex
from mcpx.broker.refusals import InvalidId, NotFound
from mcpx.broker.store import QuestionFilter, Store
from mcpx.shared import wirejson
from mcpx.shared.ids import is_id


def valid_id(eid: str) -> None:
    if not is_id(eid, "elc"):
        raise InvalidId(f"{eid!r} is not a question id (they look like elc- and 16 hex digits)")


class Reads:
    """Reads of `store`, served from `pending` and `recent` where they can be (both kept by the broker)."""

    def __init__(self, store: Store, pending: PendingIndex, recent: dict[str, tuple[Elicitation, Answer]]) -> None:
        self._store = store
        self._pending = pending
        self._recent = recent

    async def get(self, eid: str) -> tuple[Elicitation, Answer | None]:
        valid_id(eid)
        pending = self._pending.question(eid)
        if pending is not None:  # pending: no answer yet, in memory (an ended question is read from the store)
            return pending, None
        recent = self._recent.get(eid)
        if recent is not None:  # answered a moment ago through this daemon, and for good
            return recent
        found = await self._store.question(eid)
        if found is None:
            raise NotFound(f"no question {eid}")
        return found

    async def questions(self, where: QuestionFilter, limit: int) -> list[Elicitation]:
        if where.state == "pending":
            return [p.question() for p in self._pending.select(where, limit)]
        return [Elicitation.model_validate_json(row.doc) for row in await self._store.question_rows(where, limit)]

    def question_json(self, q: Elicitation) -> bytes:
        pending = self._pending.get(q.id)
        if pending is not None and q.state == "pending":
            return pending.json(time.time())
        return wirejson.encode_models(q)

    async def questions_json(self, where: QuestionFilter, limit: int) -> tuple[list[bytes], int]:
        now = time.time()
        if where.state == "pending":
            return self._pending.listing(where, limit, now)
        rows = await self._store.question_rows(where, limit)
        docs = [f'{row.doc[:-1]},"secondsLeft":{seconds_left(row.expires, now, row.state)}}}' for row in rows]
        return [",".join(docs).encode()], len(docs)

    async def count(self, state: State) -> int:
        return len(self._pending) if state == "pending" else await self._store.count(state)
