"""Who waits on a question in this daemon, and how they are told: a future per pending question, shared by its
asker and its long polls; an eager asker's own future, which may be told before the answer commits; and the
credential questions this daemon's askers hold on a store a team shares.

Everything here runs in the loop turn it is called in: telling a waiter is setting a future, never a task.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from mcpx.broker.models import Action, Answer, Elicitation
from mcpx.broker.refusals import Gone, QuestionEnded

# an eager asker's way of passing its answer on in the step the broker takes it (the action, the content as checked,
# the reason), before the answer's record is built
Hand = Callable[[Action, dict[str, Any] | None, str | None], None]


def retrieved(f: asyncio.Future[Any]) -> None:
    """Its failure was logged where it happened: nobody need await it."""
    if not f.cancelled():
        f.exception()


def told_by(shared: asyncio.Future[Answer]) -> asyncio.Future[Answer]:
    """A future of an asker's own, told whatever `shared` is told (unless it was told first)."""
    own: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
    own.add_done_callback(retrieved)
    shared.add_done_callback(functools.partial(pass_on, own))
    return own


def pass_on(mine: asyncio.Future[Answer], shared: asyncio.Future[Answer]) -> None:
    """The question's outcome, on to an asker's own future (unless it has one already: it was answered first)."""
    if mine.done():
        return
    if shared.cancelled():
        mine.cancel()
    elif (exc := shared.exception()) is not None:
        mine.set_exception(exc)
    else:
        mine.set_result(shared.result())


class Handle:
    """An in-process asker's hold on its question: the answer arrives here, secrets included.

    The asker waits on a future of its own, told whatever the question's `shared` one (which long polls wait
    on too) is told: no shield, so the asker resumes in the loop turn its answer is set, and a cancel of the
    asker takes nothing from anyone else. It is made when the asker first waits, or at the open for an eager
    asker (`own`, which the broker may tell first: Broker._deliver_first); a handle nobody waits on (a question
    opened over REST) costs nothing."""

    def __init__(self, elicitation: Elicitation, shared: asyncio.Future[Answer],
                 own: asyncio.Future[Answer] | None = None) -> None:
        self.elicitation = elicitation
        self.id = elicitation.id  # a handle's question is never replaced: its id, read without a call
        self._shared = shared
        self._own = own

    def done(self) -> bool:
        return self._shared.done() or (self._own is not None and self._own.done())

    async def answer(self) -> Answer:
        """The answer (expiry answers cancel); raises QuestionEnded when the question was abandoned."""
        if self._own is None:
            self._own = told_by(self._shared)
        return await self._own


class Waiters:
    """The futures of the questions this daemon waits on, and what it is told of them.

    `solo`: the store is this daemon's alone, so an eager asker may be told an answer before it commits."""

    def __init__(self, solo: bool) -> None:
        self._solo = solo
        self._futures: dict[str, asyncio.Future[Answer]] = {}
        # the askers that may take their answer before it commits (open's `eager`): a store this daemon alone
        # writes, and a legacy call's question (nothing re-drives such a call after a restart)
        self._eager: dict[str, asyncio.Future[Answer]] = {}
        # an eager asker's question as its commit left it, with the pending index's entry that commit made: an answer
        # checked against it is checked against the question as stored while the index holds that same entry
        self._held: dict[str, tuple[object, Elicitation]] = {}
        self._hands: dict[str, Hand] = {}  # eager askers that pass an answer on in the step it is taken (`hand`)
        # a store a team shares: the credential questions this daemon's askers hold, which only this daemon may
        # take a credential for (nothing else could carry it: rules.elsewhere)
        self.asked: set[str] = set()

    def __contains__(self, eid: str) -> bool:
        return eid in self._futures

    def get(self, eid: str) -> asyncio.Future[Answer] | None:
        return self._futures.get(eid)

    def future_for(self, eid: str) -> asyncio.Future[Answer]:
        fut = self._futures.get(eid)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            # an abandoned question nobody awaits must not log "exception never retrieved"
            fut.add_done_callback(retrieved)
            self._futures[eid] = fut
        return fut

    def drop(self, eid: str) -> asyncio.Future[Answer] | None:
        """Forget `eid`'s future (it ended before anyone was told through it); the future, if there was one."""
        return self._futures.pop(eid, None)

    def eager(self, eid: str) -> asyncio.Future[Answer] | None:
        """An eager asker's own future, while it may still be told first."""
        return self._eager.get(eid)

    def eager_asker(self, eid: str, shared: asyncio.Future[Answer], eager: bool) -> asyncio.Future[Answer] | None:
        """For an `eager` asker on a store this daemon alone writes, its own future, which an answer may be handed
        to before it commits (Broker._deliver_first); else None (the asker's future is made as it waits)."""
        if not eager or not self._solo:
            return None
        mine = told_by(shared)
        self._eager[eid] = mine
        mine.add_done_callback(functools.partial(self._told_first, eid))
        return mine

    def _told_first(self, eid: str, mine: asyncio.Future[Answer]) -> None:
        if self._eager.get(eid) is mine:
            del self._eager[eid]
            self._held.pop(eid, None)
            self._hands.pop(eid, None)

    def hand(self, eid: str, hand: Hand | None) -> None:
        """An eager asker still waiting passes its answer on through `hand` in the step it is taken (None: no more)."""
        if hand is None:
            self._hands.pop(eid, None)
        elif eid in self._eager:
            self._hands[eid] = hand

    def take_hand(self, eid: str) -> Hand | None:
        return self._hands.pop(eid, None)

    def hold(self, eid: str, entry: object, q: Elicitation) -> None:
        """`q` as its commit stored it, which put `entry` in the pending index (None: its unit is queued, not yet
        committed): kept while its eager asker waits."""
        if eid in self._eager:
            self._held[eid] = (entry, q)

    def unhold(self, eid: str) -> None:
        self._held.pop(eid, None)

    def held(self, eid: str, entry: object) -> Elicitation | None:
        """The question `hold` kept, if the pending index still holds the entry its commit made (nothing stored
        changed it since: no escalation, no approval counted), or holds none while its unit is still queued; else
        None: then it is read from that entry."""
        kept = self._held.get(eid)
        return kept[1] if kept is not None and kept[0] is entry else None

    def wake(self, eid: str, answer: Answer) -> None:
        """Wake whoever waits on the question (its asker, its long polls) once the answer has committed (an eager
        asker may have it already: Broker._deliver_first)."""
        self.asked.discard(eid)
        fut = self._futures.pop(eid, None)
        if fut is not None and not fut.done():
            # a result is never an exception nobody retrieved: `retrieved` is not scheduled (a loop callback a
            # lifecycle) for a future that can no longer fail
            fut.remove_done_callback(retrieved)
            fut.set_result(answer)

    def end(self, eid: str, reason: str, told: asyncio.Future[Answer] | None = None) -> None:
        """A question abandoned (here, by a take-over, or on another daemon): whoever waits on it hears it ended, and
        nothing of it is kept — its future, and the mark that this daemon asked it. With `told`: only if that is
        still its future (a question that failed to commit, whose asker was told of it first)."""
        self.asked.discard(eid)
        fut = self._futures.pop(eid, None)
        if told is not None and fut is not told:
            return
        if fut is not None and not fut.done():
            fut.set_exception(QuestionEnded(eid, "abandoned", reason))

    @staticmethod
    def told(fut: asyncio.Future[Answer]) -> Answer:
        """What a done future was told, to a remote waiter: the answer, or Gone if the question was abandoned."""
        try:
            return fut.result()
        except QuestionEnded as ended:
            raise Gone(f"{ended.eid} was abandoned: {ended.reason}", state="abandoned") from None
