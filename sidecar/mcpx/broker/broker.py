"""The broker: open a question, answer it once, wait for it, expire it, abandon it.

It knows nothing of MCP or HTTP. An asker in this process holds a `Handle` and is woken
the moment an answer commits (no polling), or, if it asked `eager` on a store this daemon alone
writes, the moment the answer is decided (`answer`); everyone else reads through the broker or
follows the event bus. It is the only part that holds the store: what else is durable (a call task's
record, a fact learnt about a server) goes through it too.

`Broker` is the facade its callers (upstream/, surface/, daemon/, inbox/) see; it builds its parts and wires
them, each with one job: the answer rules (`rules`, pure functions), the waiters and their futures
(`waiters`), the deadline sweeper and its heap (`sweeper`), the team of daemons sharing a store (`team`), and
the units it writes (`writes`). Which part does what is in docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any, Protocol

from mcpx.broker import approvals, passkeys, policy, routing, rules
from mcpx.broker.events import EventBus
from mcpx.broker.models import (
    Action,
    Answer,
    AuditRecord,
    Elicitation,
    OpenRequest,
    Passkey,
    State,
    StoredTask,
    TaskState,
)
from mcpx.broker.passkeys import Vouch
from mcpx.broker.pending import PendingIndex
from mcpx.broker.reads import Reads, valid_id
from mcpx.broker.refusals import BrokerError, Forbidden, InvalidContent, NotFound
from mcpx.broker.refusals import (
    InvalidQuestion as InvalidQuestion,  # where upstream/mcp_call.py has always found it
)
from mcpx.broker.rules import as_stored
from mcpx.broker.rules import redact as redact  # where daemon/ and inbox/ have always found it
from mcpx.broker.store import AuditFilter, QuestionFilter, QuestionRow, Store, StoreInfo, StoreLease, TaskRow, Tx
from mcpx.broker.sweeper import Sweeper
from mcpx.broker.team import Team
from mcpx.broker.waiters import Hand, Waiters, retrieved
from mcpx.broker.waiters import Handle as Handle
from mcpx.broker.writes import Outcome, Writes
from mcpx.config.models import Config
from mcpx.shared import wirejson

log = logging.getLogger("mcpx.broker")
# a fact of the store, per person: they have had a passkey (revoking every one does not make them new again)
HAD_PASSKEY = "passkeys.had."

ALL = 2**62  # a read's limit that is no limit
# how long a record nobody waits on (behind a result or an answer already delivered) may wait for the next
# commit to ride with: at most this much of them is lost to a kill -9, and a stream of them costs a commit each
# this often instead of one each
BEHIND = 0.05


class Settings(Protocol):
    """Where the broker reads the config in force (a ConfigSource): TTLs and the policy, at each question."""

    @property
    def config(self) -> Config: ...


async def _first(fut: asyncio.Future[Any], stop: asyncio.Future[Any] | None, timeout: float) -> bool:
    """Whether `fut` is done within `timeout` seconds (or before `stop` is): `asyncio.wait(..., FIRST_COMPLETED)` as a
    long poll needs it, one future of its own woken by a done-callback or a timer, where asyncio.wait's machinery
    (its sets, its coroutine checks through the ABC, a callback per future) was ~4% of a lifecycle's loop. Neither
    future is cancelled or changed (the asker's is the asker's): the callbacks come off as it returns, or is
    cancelled."""
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)

    fut.add_done_callback(wake)
    if stop is not None:
        stop.add_done_callback(wake)
    timer = asyncio.get_running_loop().call_later(timeout, wake)
    try:
        await woken
    finally:
        timer.cancel()
        fut.remove_done_callback(wake)
        if stop is not None:
            stop.remove_done_callback(wake)
    return fut.done()


class Broker:
    def __init__(self, store: Store, settings: Settings, pid: int | None = None) -> None:
        self._store = store
        self.bus = EventBus()
        self._settings = settings
        self.pid = pid or os.getpid()
        self._settling: set[asyncio.Task[Any]] = set()  # work of the broker's own, cancelled at stop
        # a store a team shares: answers say which daemon's user and host they came through, and a credential
        # is taken only by the daemon whose asker holds the question (nothing else could carry it)
        self._me = store.info.daemon
        self._writes = Writes(store, self.pid, self._me)
        self.nonces = passkeys.Nonces()  # the passkey challenges this daemon handed out, each taken once
        self._waiters = Waiters(solo=self._me is None)
        self._sweeper = Sweeper(self._expire)
        self._nudges = Sweeper(self._nudge)  # approvals' reminders and escalations, swept like deadlines
        self._team = Team(store, self._writes, self._waiters, self._sweeper, self._in_background)
        # questions whose own client is asked before their commit is queued (open's `committing`): an answer to one
        # waits here until it is queued, so that it commits behind it whatever the loop runs first
        self._queuing: dict[str, asyncio.Future[None]] = {}
        self._pending = PendingIndex()  # listings and secondsLeft are served from here, in step with the store
        self._reads = Reads(store, self._pending, self._writes.recent)
        store.follow(self._committed)

    # ---- lifecycle

    async def start(self) -> None:
        # a shared store's other daemons go on writing while this reads: what they move meanwhile is handed on
        # with newer rows than this read may return
        self._pending.begin_fill()
        self._pending.fill(await self._store.question_rows(QuestionFilter(state="pending"), ALL))
        deadlines = self._pending.deadlines()
        for _, eid in deadlines:
            self._waiters.future_for(eid)
        self._sweeper.fill(deadlines)
        self._sweeper.start()
        for _, eid in deadlines:  # a restart goes on with the approvals' schedule the store holds
            entry = self._pending.get(eid)
            # parsed only if it has approvals (the row's column says so): a start with thousands pending reads no
            # more than it did
            due = approvals.due_at(entry.question().approvals) if entry is not None and entry.approvals else None
            if due is not None:
                self._nudges.due(due, eid)

    def start_reminders(self) -> None:
        """Sweep the approvals' reminders and escalations: once whoever sends them (the notifier) follows the bus,
        since a reminder due while the daemon was down is written at once."""
        self._nudges.start()

    async def stop_reminders(self) -> None:
        await self._nudges.stop()

    async def stop(self) -> None:
        for task in list(self._settling):
            task.cancel()
        await self._sweeper.stop()
        await self._nudges.stop()

    def _in_background(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        """Work of the broker's own that nobody awaits: held until done (the loop keeps only weak references),
        cancelled at stop; what it raises was logged where it happened."""
        task = asyncio.create_task(work, name=name)
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        task.add_done_callback(retrieved)

    def handle(self, eid: str, elicitation: Elicitation) -> Handle | None:
        """Re-attach to a pending question after a restart (modern-era calls re-driven)."""
        fut = self._waiters.get(eid)
        return Handle(elicitation, fut) if fut is not None else None

    def _committed(self, records: list[AuditRecord], ours: bool, rows: list[QuestionRow]) -> None:
        """Every committed record, in the log's order, from the store: on to the bus; another daemon's
        transitions of a shared store also reach this daemon's sweeper and waiters. The questions they
        touched are in the pending index first, so whoever hears of a question finds it listed."""
        self._pending.apply(rows)
        for record in records:
            if ours and record.kind == "elicit.answered" and record.elicit is not None:
                self._writes.remember(record.elicit)
            self.bus.publish(record)
            if not ours:
                self._team.heard(record)
                if record.kind == "elicit.open" and record.elicit and "approvalsDue" in record.data:
                    # a team-mate's question that needs approvals: this daemon sweeps its schedule too (the
                    # store says which sweep does each reminder: broker/approvals.py's nudge)
                    self._nudges.due(datetime.fromisoformat(record.data["approvalsDue"]).timestamp(), record.elicit)

    # ---- open

    async def open(self, req: OpenRequest, task: Callable[[Elicitation, bool], StoredTask] | None = None,
                   committing: Callable[[Handle], Awaitable[None]] | None = None, eager: bool = False,
                   left: Callable[[Handle], Awaitable[None]] | None = None) -> Handle:
        """Open a question. `task`: the asking call's record as it stands with this question open (pending, or
        settled at once by the policy), stored in the question's own commit, so a restart knows of the question
        exactly when anyone can.

        `committing`: told of the question just before its commit is queued, if the policy leaves it pending, so
        that the one client that is to be asked (a legacy call's own) is asked first and reads it while it
        commits. Nothing else hears of it before the commit, and an answer to it commits after it (one queue,
        in order). If the commit fails, the handle it was given ends (QuestionEnded) and the failure is raised
        here. With `eager` on a store this daemon alone writes, the question rides instead: its commit is queued
        to wait (BEHIND) for the next commit that cannot, or its horizon, and this returns once it is queued; its
        client's answer is handed over meanwhile, and commits with it (the call's end is the commit that cannot
        wait: one commit for the round trip). A failed commit then ends the handle alone.

        `eager`: the asker may be handed its answer before the answer commits, on a store this daemon alone writes
        (see `answer`). Only for a legacy call's question: such a call does not outlive its daemon, so nothing
        could re-send what its server was told; a call that may be re-driven after a restart is told only what
        the store holds.

        `left`: the opener was cancelled while the question's commit ran, which nothing can take back: once it
        committed, it is handed the question (as open would have returned it) to end it, and the cancel goes on. So
        a question is never left committed pending with nobody to hear its answer, and its opener calls this in its
        own step, with no task in between (issue 39: the question reaches its client in the turn it is asked).
        Without `left`, the cancel leaves the question to its deadline."""
        now = time.time()
        config = self._settings.config  # one config for the whole decision, read once
        ttl = req.ttl if req.ttl is not None else config.ttl_for(req.server)
        q, decided = rules.question_of(req, now, ttl)
        # who asks is looked up only where an approvals rule could name them (most configs have none)
        wanted = req.approvals or (approvals.rule_for(config.elicit, q, req.asker or self.asker())
                                   if config.elicit.approvals else None)
        decision: policy.Decision | None = None
        if req.presence or (wanted is not None and wanted.presence) or policy.needs_presence(config, q):
            # only a person's passkey accepts it: the agent, which can only decline it, is not asked first
            q = q.model_copy(update={"presence": True} if q.audience == "human" else {
                "presence": True, "audience": "human",
                "reason": f"only the person's passkey accepts it (docs/presence.md); routing alone said: {q.reason}"})
        if wanted is not None:
            # named people's approvals are the answer: no rule answers for them
            q = q.model_copy(update={"approvals": approvals.start(q, wanted)})
        elif not q.presence:  # a question only the person's passkey accepts: no rule answers for them either
            decision, _checks = policy.evaluate(config.elicit, q, mode=req.policy_mode)
        waiters = self._waiters
        told: asyncio.Future[Answer] | None = None
        mine: asyncio.Future[Answer] | None = None
        written: asyncio.Future[Outcome] | None = None
        try:
            if committing is not None and decision is None:
                told = waiters.future_for(q.id)
                mine = waiters.eager_asker(q.id, told, eager)
                if self._me is not None and q.secret_fields:
                    waiters.asked.add(q.id)  # its credential may be accepted here: an answer may be in the same batch
                # the one client to be asked is asked first, and the commit queued as it returns: the commit runs
                # while that client reads the question. An answer that comes sooner waits on _queuing, and so
                # commits behind the question, as any answer does.
                queued = self._queuing[q.id] = asyncio.get_running_loop().create_future()
                early = Handle(q, told, mine)  # the handle its client is asked with, and an eager asker's own
                try:
                    await committing(early)
                    # the question's record (the call's row with it open, the unit) is built once its client has
                    # it: not on the way to that client. An eager asker's question rides (BEHIND): its client's
                    # answer is handed over while it is still queued, and the answer and the call's end commit
                    # with it, one commit for the round trip; nobody else hears of it before that commit
                    written = self._store.submit(self._opening(q, decided, decision, task, req.pid, now),
                                                 BEHIND if mine is not None else 0.0)
                    if mine is not None:
                        waiters.hold(q.id, None, q)
                finally:
                    del self._queuing[q.id]
                    queued.set_result(None)
                if mine is not None:
                    written.add_done_callback(functools.partial(self._rode, q, told))
                    return early
            else:
                written = self._store.submit(self._opening(q, decided, decision, task, req.pid, now))
            # shielded: a cancel of the opener leaves the commit to the store (it may already be running), not a
            # cancelled future whose unit still commits unseen
            outcome = await asyncio.shield(written)
        except asyncio.CancelledError:
            if written is None:  # cancelled before anything was queued: the client asked meanwhile hears it ended
                if told is not None:
                    waiters.end(q.id, "its asker went away before it was stored", told=told)
                raise
            await self._left_open(q, written, told, mine, eager, left)
            raise
        except BaseException as exc:
            # a failed commit, or a stop before anything was queued: the client asked meanwhile hears it ended
            if told is not None and (written is None or isinstance(exc, Exception)):
                waiters.end(q.id, f"it could not be stored: {exc or type(exc).__name__}", told=told)
            raise
        return self._committed_open(q, outcome, told, mine, eager)

    async def _left_open(self, q: Elicitation, written: asyncio.Future[Outcome], told: asyncio.Future[Answer] | None,
                         mine: asyncio.Future[Answer] | None, eager: bool,
                         left: Callable[[Handle], Awaitable[None]] | None) -> None:
        """A question whose opener was cancelled while it committed: once committed, what open does then (its
        deadline swept), and the question handed to `left` to end it; a failed commit stored nothing to end."""
        try:
            handle = self._committed_open(q, await written, told, mine, eager)
        except Exception as exc:
            if told is not None:
                self._waiters.end(q.id, f"it could not be stored: {exc}", told=told)
            return
        if left is not None:
            with contextlib.suppress(Exception):  # what ending it raised was logged where it happened
                await left(handle)

    def _committed_open(self, q: Elicitation, outcome: Outcome, told: asyncio.Future[Answer] | None,
                        mine: asyncio.Future[Answer] | None, eager: bool) -> Handle:
        """What open does once the question's commit landed: its asker's handle, the question as it stands."""
        waiters = self._waiters
        q, answer, ended = outcome.settled(), outcome.answer, outcome.ended
        # the future the early handle holds, even if an answer committed right behind the question already took
        # it out of the table
        fut = told if told is not None else waiters.future_for(q.id)
        if self._me is not None and q.secret_fields and q.state == "pending":
            waiters.asked.add(q.id)
        if answer is not None:
            waiters.wake(q.id, answer)
        elif ended is not None:
            waiters.drop(q.id)
            fut.set_exception(ended)
        else:
            self._scheduled(q)
            self._pending.keep(q)  # its answer, a moment later, is checked against this, not a parse of its document
        # the subscribers were woken by the commit before this was (broker/commits.py): the news of a question
        # goes out before the reply to whoever opened it
        if mine is None:
            mine = waiters.eager_asker(q.id, fut, eager and q.state == "pending")
        if mine is not None and q.state == "pending":
            # its answer is checked against this, not a parse of the stored document (and a second read of its form)
            waiters.hold(q.id, self._pending.get(q.id), q)
        return Handle(q, fut, mine)

    def _rode(self, q: Elicitation, told: asyncio.Future[Answer], written: asyncio.Future[Outcome]) -> None:
        """An eager asker's question that rode (open's `committing`) has committed, or failed to: what open does
        once a commit lands, here (its deadline swept, its approvals' schedule), or its handle ended with the
        failure (the asker's call fails naming it, and its client's request is withdrawn)."""
        failure = asyncio.CancelledError() if written.cancelled() else written.exception()
        entry = self._pending.get(q.id) if failure is None else None
        if entry is None:  # it failed, or it was answered (or ended) in the batch that stored it
            self._waiters.unhold(q.id)
            if failure is not None:
                self._waiters.end(q.id, f"it could not be stored: {failure or type(failure).__name__}", told=told)
            return
        self._waiters.hold(q.id, entry, q)
        self._scheduled(q)
        self._pending.keep(q)

    def _scheduled(self, q: Elicitation) -> None:
        """A question that committed pending: its deadline swept, and its approvals' reminders and escalations."""
        self._sweeper.due(q.expires_at.timestamp(), q.id)
        if (due := approvals.due_at(q.approvals)) is not None:
            self._nudges.due(due, q.id)

    def _opening(self, q: Elicitation, decided: routing.Route, decision: policy.Decision | None,
                 task: Callable[[Elicitation, bool], StoredTask] | None, pid: int | None,
                 now: float) -> Callable[[Tx], Outcome]:
        """The unit that opens `q`, with its asking call's record as it stands with `q` open."""
        stored_task = task(q, decision is None) if task is not None else None
        return self._writes.opening(q, decided, decision, stored_task, pid, now)

    # ---- answer

    async def answer(self, eid: str, action: Action, content: dict[str, Any] | None = None, *, by: str,
                     session: str | None = None, pid: int | None = None, reason: str | None = None,
                     acknowledged: bool = True, proof: passkeys.Proof | None = None, text_known: bool = False,
                     ) -> tuple[Elicitation, Answer | None]:
        """Answer a question. Returns (question, answer), once the answer has committed; answer is None when an
        agent's decline escalated it.

        `acknowledged` False: whoever answered is told nothing back (an MCP client's reply to elicitation/create
        has no reply of its own), so an answer its asker is handed before it commits (`_deliver_first`) may wait
        for company: it commits with the next commit (the call's end, its next question) or within BEHIND.

        `text_known`: the content and the reason are known to hold no lone surrogate, their caller looked as it read
        them (/v1's route: api/table.read_json_body refuses such a body, its 400 naming where), so they are not
        encoded here to look again; every other door (MCP, the inbox, an answer mcpx gives itself) is looked at here."""
        valid_id(eid)
        if not text_known and (where := wirejson.lone_surrogate({"content": content, "reason": reason})) is not None:
            raise InvalidContent(f"the answer does not fit the question: {where} {wirejson.SURROGATE_PROBLEM}",
                                 {where: wirejson.SURROGATE_PROBLEM})
        if proof is not None and (used := self.nonces.take(eid, proof.nonce)) is not None:
            raise used  # each challenge is taken once, whatever became of the answer it was for
        if (queued := self._queuing.get(eid)) is not None:
            await queued  # its question is being asked of its own client: its commit is queued first
        now = time.time()
        first = None if proof is not None else self._eagerly(eid, action, content, by, session, pid, reason, now,
                                                              0.0 if acknowledged else BEHIND)
        if first is not None:
            landing, given = first
            # shielded: a caller that stops waiting (a call's driver ends as its call does) leaves the landing
            # to the store's future, which wakes the long polls once committed (_landed)
            return await asyncio.shield(landing), given
        # on a store this daemon alone writes, with nothing queued that may move it, the question as stored is the
        # one the pending index holds: the unit takes that, not a read of its row and a parse of its document
        known = self._pending.question(eid) if self._me is None and not self._writes.move_queued(eid) else None
        unit = self._writes.answering(eid, action, content, by, session, pid, reason, now,
                                      self._waiters.asked.__contains__, proof, self._may_sign, known)
        try:
            outcome = await self._writes.write((eid,), unit)
        finally:
            self._writes.forget(eid)  # the commit failed; or it went to recent as it committed
        for reached in (outcome.expired, outcome.answer):
            if reached is not None:
                self._waiters.wake(eid, reached)
        return outcome.settled(), outcome.answer

    def hand_over(self, eid: str, action: Action, content: dict[str, Any] | None, *, by: str,
                  session: str | None) -> bool:
        """An MCP client's answer to the question it was asked (its reply to elicitation/create, which has no reply of
        its own), handed to the question's eager asker in the step the reply is read: as `answer(...,
        acknowledged=False)` hands it (`_deliver_first`: the asker first, the commit riding), with nothing awaited.
        True if it was; False, with nothing done, where it is not that simple (no eager asker waiting, the question
        still being queued, a unit queued that may move it, an answer that does not fit or is refused): `answer`
        then takes it the usual way, and says why."""
        if eid in self._queuing or wirejson.lone_surrogate({"content": content}) is not None:
            return False
        try:
            return self._eagerly(eid, action, content, by, session, None, None, time.time(), BEHIND) is not None
        except BrokerError:  # refused, or it does not fit: `answer` says so, the same way
            return False

    def _eagerly(self, eid: str, action: Action, content: dict[str, Any] | None, by: str, session: str | None,
                 pid: int | None, reason: str | None, now: float, within: float,
                 ) -> tuple[asyncio.Future[Elicitation], Answer] | None:
        """`_deliver_first`, if the question has an eager asker still waiting and nothing queued may move it."""
        mine = self._waiters.eager(eid)
        if mine is None or mine.done() or self._writes.move_queued(eid):
            return None
        # the question as stored, or as queued to be (it rides: open's `committing`): held in memory since its
        # commit, unless the store changed it since (then its stored document)
        q = self._waiters.held(eid, self._pending.get(eid)) or self._pending.question(eid)
        return None if q is None else self._deliver_first(q, mine, action, content, by, session, pid, reason, now,
                                                          within)

    def _deliver_first(self, q: Elicitation, mine: asyncio.Future[Answer], action: Action,
                       content: dict[str, Any] | None, by: str, session: str | None, pid: int | None,
                       reason: str | None, now: float, within: float,
                       ) -> tuple[asyncio.Future[Elicitation], Answer] | None:
        """The answer to a pending question whose asker is eager, handed to the asker before it commits: a legacy
        server has it while the commit runs, not after (issue 14: no commit between an answer and the upstream).
        The answer's commit, and the answer. Or None, if it is not that simple (the question ran out of time, an
        agent's decline escalates it): then the answer takes the usual way.

        Safe because the store is this daemon's alone and nothing queued may move the question (`moving`): the
        question as the pending index holds it is the question as the store holds it, and the answer's unit is
        queued in this same step, ahead of any other, so the answer given here is the one the store will hold.
        Whoever answered still hears back only after the commit. The asker's own future is set first, so the
        asker's turn (the reply written upstream) comes before the commit's. Were the daemon killed in between,
        the question would be found pending and abandoned with its call (the server had the answer, the store
        never did): docs/internals.md, "What is written when"."""
        if now >= q.expires_at.timestamp() or rules.escalates(q, action, by):
            return None
        refusal = (rules.refusal(q, by, session, action) or rules.approvers_only(q, action)
                   or rules.unproven(q, action, False))
        if refusal is not None:
            raise refusal
        clean = rules.checked_content(q, action, content)
        if (hand := self._waiters.take_hand(q.id)) is not None:
            hand(action, clean, reason)  # the asker passes it on now, before its record is built (or in its turn)
        writes = self._writes
        answer = writes.answer_of(q, action, clean, by, session, pid, reason, now)
        mine.set_result(answer)  # before the unit is queued: the asker's turn comes before the commit's
        written = writes.write((q.id,), functools.partial(writes.write_answered, records=[], q=q, answer=answer),
                               within)
        written.add_done_callback(functools.partial(self._landed, q.id, answer))
        return written, answer

    def hand_first(self, eid: str, hand: Hand | None) -> None:
        """An eager asker that can pass its answer on in the step it is taken (a legacy server's reply written from
        there: upstream/mcp_call.py) is handed it through `hand` there, before its record (the Answer, the unit) is
        built; it is then told it as before, in its own turn. None: no more (it stopped waiting)."""
        self._waiters.hand(eid, hand)

    def _landed(self, eid: str, answer: Answer, written: asyncio.Future[Elicitation]) -> None:
        """An answer its asker already had has committed, or failed to: the long polls are woken with it; or the
        question is abandoned, since the server acted on an answer the store does not hold (left pending, it
        would expire to a cancel the server never saw)."""
        self._writes.forget(eid)  # committed: it went to recent as it did; failed: it never will
        if written.cancelled():
            return  # not by the broker: it awaits it shielded
        exc = written.exception()
        if exc is None:
            self._waiters.wake(eid, answer)
            return
        why = f"its answer reached the server but could not be stored: {exc}"
        log.error("%s: %s", eid, why)
        self._in_background(self.abandon(eid, why), f"mcpx-abandon-{eid}")

    def asker(self) -> str | None:
        """Who a question this daemon raises on its own comes from, as a person of the config: MCPX_PERSON of the
        daemon, or on a team store the person whose `users` names this daemon's user@host."""
        if person := os.environ.get("MCPX_PERSON"):
            return person
        return self._settings.config.person_of(self._me.user, self._me.host) if self._me is not None else None

    def _may_sign(self, person: str) -> Forbidden | None:
        """Whose passkey accepts a question that needs presence (approvals aside, which name their people): the
        daemon's person when it has one (MCPX_PERSON, or on a team the config's), else any person enrolled here."""
        mine = self.asker()
        if mine is None or person == mine:
            return None
        return Forbidden(f"this daemon's questions are {mine}'s to accept, and the passkey is {person}'s")

    async def approve(self, eid: str, person: str | None, action: Action, reason: str | None = None,
                      proof: passkeys.Proof | None = None) -> tuple[Elicitation, Answer | None]:
        """`person`'s accept or decline through their own link: counted once (broker/approvals.py). The question as
        it now stands, and its answer if this decided it; the refusal raised (a self-approval's is recorded).
        `proof`: the approver's passkey assertion, which a question that needs presence counts an accept by (and
        which names the approver, `person` None)."""
        valid_id(eid)
        if proof is not None and (used := self.nonces.take(eid, proof.nonce)) is not None:
            raise used
        unit = self._writes.approving(eid, person, action, reason, time.time(), proof)
        try:
            outcome = await self._writes.write((eid,), unit)
        finally:
            self._writes.forget(eid)
        for reached in (outcome.expired, outcome.answer):
            if reached is not None:
                self._waiters.wake(eid, reached)
        return outcome.settled(), outcome.answer

    async def _nudge(self, due: list[str], now: float) -> int:
        """The nudge sweeper's work: reminders and escalations due, written (once, whichever daemon comes first),
        and each question's next time put back on the heap."""
        done = await self._writes.write(due, self._writes.nudging(due, now))
        for eid, at in done:
            if at is not None:
                self._nudges.due(at, eid)
        return len(done)

    # ---- expiry and abandonment

    async def expire_due(self, now: float | None = None) -> int:
        return await self._sweeper.expire_due(now)

    async def _expire(self, due: list[str], now: float) -> int:
        """The sweeper's `expire`: those of `due` still pending answered cancel by expiry, their askers woken."""
        expired = await self._writes.write(due, self._writes.expiring(due, now))
        for eid, answer in expired:
            self._waiters.wake(eid, answer)
        return len(expired)

    async def abandon(self, eid: str, reason: str) -> bool:
        """The asker went away; the question ends without an answer. False if it had already ended."""
        if not await self._writes.write((eid,), self._writes.abandoning(eid, reason, time.time())):
            return False
        self._waiters.end(eid, reason)
        return True

    async def take_over(self, task: StoredTask, owner: str, reason: str) -> list[str]:
        """End a call of a daemon whose lease lapsed (broker/team.py): its pending questions abandoned with `reason`,
        the task failed; the questions abandoned, [] when another daemon took it over first."""
        pending = [q.id for q in await self.questions(QuestionFilter(task=task.id, state="pending"))]
        return await self._team.take_over(task, owner, reason, pending)

    async def lapsed_tasks(self, states: tuple[TaskState, ...]) -> list[tuple[StoreLease, StoredTask]]:
        return await self._team.lapsed_tasks(states)

    async def daemons(self) -> list[StoreLease]:
        return await self._team.daemons()

    @property
    def store_info(self) -> StoreInfo:
        return self._store.info

    def mark_resumed(self, q: Elicitation, data: dict[str, Any]) -> None:
        """Recorded behind the answer's delivery: queued by a loop callback, once the asker's step is over (its
        reply to the server written: a legacy asker is told right before it writes), and committed with the next
        commit, within BEHIND; neither the asker nor the store waits for it."""
        asyncio.get_running_loop().call_soon(functools.partial(
            self._writes.submit_record, "elicit.resumed", data, elicit=q.id, session=q.session, trace=q.trace,
            task=q.task, within=BEHIND))

    # ---- reads

    # the reads are handed over as the part's own coroutines, not awaited inside one more of the facade's

    def get(self, eid: str) -> Coroutine[Any, Any, tuple[Elicitation, Answer | None]]:
        return self._reads.get(eid)

    def questions(self, where: QuestionFilter, limit: int = 10000) -> Coroutine[Any, Any, list[Elicitation]]:
        """Questions oldest first; pending ones from memory."""
        return self._reads.questions(where, limit)

    def question_json(self, q: Elicitation) -> bytes:
        """`q`'s document as the API shows it: a pending question's as stored, with its secondsLeft spliced in (it
        was encoded once, at its commit), any other encoded now."""
        return self._reads.question_json(q)

    def questions_json(self, where: QuestionFilter, limit: int) -> Coroutine[Any, Any, tuple[list[bytes], int]]:
        """Questions oldest first, as the comma-separated pieces of a JSON array's contents (to be joined once,
        inside the reply), and how many: the listing that may run to 10,000.

        The stored documents are passed on as they are, not parsed; each gets its secondsLeft appended
        at its end (a stored document never holds one). Pending ones come from memory, encoded once.
        """
        return self._reads.questions_json(where, limit)

    async def wait(self, eid: str, timeout: float, stop: asyncio.Future[Any] | None = None) -> Answer | None:
        """For remote waiters: the question's answer as stored (a credential's value [redacted]); None at the timeout
        (or once `stop` is done: the daemon is stopping).

        A question pending here is waited on without being read: its answer, once committed through this daemon,
        is taken from what the commit left in recent (a pending question's document is parsed only when it is
        shown, not once by every lifecycle's waiter)."""
        q: Elicitation | None = None
        fut = self._waiters.get(eid) if self._pending.get(eid) is not None else None
        if fut is None:
            q, fut, answer = await self._read_to_wait(eid)
            if fut is None:
                return answer
        if not fut.done() and not await _first(fut, stop, timeout):
            return None
        answer = Waiters.told(fut)
        recent = self._writes.recent.get(eid)
        if recent is not None:  # answered through this daemon: its stored copy, from the commit that woke us
            return recent[1]
        # the answer in hand is the committed one; shown redacted like the stored copy
        if q is None:
            q, _ = await self.get(eid)
        return as_stored(answer, q.secret_fields)

    async def _read_to_wait(self, eid: str) -> tuple[Elicitation, asyncio.Future[Answer] | None, Answer | None]:
        """A question `wait` cannot wait on unread (not pending here, or no future for it yet): the question, and
        either the future to wait on or its stored answer (no future); Gone if it was abandoned."""
        q, answer = await self.get(eid)
        if answer is not None:
            return q, None, answer
        if q.state == "abandoned":
            raise rules.abandoned(q)
        fut = self._waiters.get(eid)
        if fut is None:
            # opened on another daemon of a shared store, and not yet heard of here: wait for its answer's
            # record like any other, after a second look in case that record came before the future
            fut = self._waiters.future_for(eid)
            q, answer = await self.get(eid)
            if q.state != "pending":
                self._waiters.drop(eid)
                if answer is None:
                    raise rules.abandoned(q)
                return q, None, answer
        return q, fut, None

    async def audit(self, where: AuditFilter, limit: int = 1000) -> list[AuditRecord]:
        return await self._store.audit(where, limit)

    async def last_seq(self) -> int:
        """Where the audit log stands: the seq of its latest record (0 while empty)."""
        return await self._store.last_seq()

    def count(self, state: State) -> Coroutine[Any, Any, int]:
        return self._reads.count(state)

    # ---- what else is durable: a call task's record, facts learnt about servers

    async def save_task(self, task: StoredTask) -> None:
        await self._store.write(lambda tx: tx.put_task(task))

    def finish_task(self, built: Callable[[], TaskRow], data: dict[str, Any], *, tid: str, session: str,
                    trace: str | None, behind: bool = False) -> asyncio.Future[Any]:
        """A task's final record and its task.done, committed together; the record is published after.

        `built`: the task's final row, built (encoded) inside the unit, wherever its batch commits: off the loop,
        for every call's end. `behind`: nothing durable waits on it (the call never asked, so no stored row of it
        says it is running, and no restart would re-drive it): it rides with the next commit, within BEHIND
        seconds, or commits on the store's own thread, written with the other such ends by one unit
        (`Writes.end_call`). Else (the store holds a row saying the call runs) it commits at once, but after the
        result, which no longer waits on it: off the loop (issue 39: one commit per question's round trip, after
        the reply, with the question and its answer that rode until then)."""
        if behind:
            return self._writes.end_call(built, data, tid=tid, session=session, trace=trace, within=BEHIND,
                                         heard=self.bus.hears)

        def put(tx: Tx) -> None:
            tx.put_task(built())

        return self._writes.submit_record("task.done", data, session=session, trace=trace, task=tid, with_unit=put,
                                          waited=False)

    async def task(self, tid: str) -> StoredTask | None:
        return await self._store.task(tid)

    async def tasks_in(self, states: tuple[TaskState, ...]) -> list[StoredTask]:
        return await self._store.tasks_in(states)

    async def record_consent(self, q: Elicitation, yes: bool, by: str, domain: str) -> AuditRecord:
        """A person's yes or no to opening a url-mode question's page: audited, and nothing else changes."""
        return await self._writes.submit_record("elicit.consent", {"consent": yes, "by": by, "domain": domain},
                                                elicit=q.id, session=q.session, trace=q.trace, task=q.task)

    async def record_shown(self, q: Elicitation, where: str, how: str, by: str, pid: int | None) -> AuditRecord:
        """A client's word that the question is in front of the person (its dialog opened, a notification shown):
        audited, so whoever tells the agent what the person saw can say it truly; nothing else changes."""
        return await self._writes.submit_record("elicit.shown", {"where": where, "how": how, "by": by},
                                                elicit=q.id, session=q.session, trace=q.trace, task=q.task, pid=pid)

    async def fact(self, key: str) -> Any:
        return await self._store.fact(key)

    async def set_fact(self, key: str, value: Any) -> None:
        await self._store.write(lambda tx: tx.put_fact(key, value))

    # ---- people's passkeys (docs/presence.md)

    async def passkeys(self, person: str | None = None) -> list[Passkey]:
        return await self._store.passkeys(person)

    async def vouchers(self, person: str) -> list[str] | None:
        """Whose passkey must vouch for a new passkey of `person` (docs/presence.md): theirs, or the daemon's owner's
        (if the owner has one). None: the new one is trusted on first use, because `person` never had a passkey, or
        had and has none left while no owner's passkey could vouch instead (a single person's daemon)."""
        owner = self.asker()
        others = [owner] if owner is not None and owner != person and await self._store.passkeys(owner) else []
        if await self._store.passkeys(person):
            return [person, *others]
        if others and await self._store.fact(HAD_PASSKEY + person):
            return others  # all of theirs revoked: revoking is no way back to trust on first use
        return None

    async def enroll(self, key: Passkey, by: str, vouch: Vouch | None = None) -> AuditRecord:
        """A person's new passkey, stored with its person.enrolled record, which says who handed out the link (`by`)
        and how the passkey came to be trusted: on first use (vouchers() is None), or vouched for by an assertion
        of a passkey of one of vouchers() that signs exactly this passkey (`vouch`). Forbidden otherwise."""
        now = time.time()
        vouchers = await self.vouchers(key.person)
        data: dict[str, Any] = {"person": key.person, "passkey": key.id, "by": by, "how": "first use"}
        count, voucher = 0, None
        if vouchers is not None and vouch is None:
            raise Forbidden(f"{key.person} has had a passkey: another is added only with an assertion by a passkey of "
                            f"{' or '.join(vouchers)}")
        if vouchers is not None and vouch is not None:
            cid = vouch.credential_id()
            voucher = next((k for k in await self._store.passkeys() if k.id == cid), None)
            if voucher is None:
                raise Forbidden(f"passkey {cid} is not enrolled here (it may have been revoked): mcpx person list")
            if voucher.person not in vouchers:
                raise Forbidden(f"a passkey of {voucher.person} cannot vouch for {key.person}'s: only "
                                f"{' or '.join(vouchers)}'s can")
            count = passkeys.verify_vouch(vouch, key, voucher)
            data.update(how="vouched", vouchedBy=voucher.person, voucherPasskey=voucher.id)
        elif await self._store.fact(HAD_PASSKEY + key.person):
            data["again"] = True  # every passkey of theirs was revoked, and nobody else could vouch

        def add(tx: Tx) -> None:
            if voucher is not None:
                passkeys.record_use(tx, voucher, count, now)
            tx.add_passkey(key)
            tx.put_fact(HAD_PASSKEY + key.person, True)

        return await self._writes.submit_record("person.enrolled", data, with_unit=add)

    async def revoke(self, person: str, cid: str) -> AuditRecord:
        """`person`'s passkey `cid` removed: it signs nothing from now on; NotFound if they have no such one."""
        if not any(key.id == cid for key in await self._store.passkeys(person)):
            raise NotFound(f"{person} has no passkey {cid} (mcpx person list shows each person's)")

        def remove(tx: Tx) -> None:
            tx.remove_passkey(person, cid)

        return await self._writes.submit_record("person.revoked", {"person": person, "passkey": cid},
                                                with_unit=remove)

    async def presence_challenge(self, eid: str, content: dict[str, Any] | None,
                                 rp_id: str) -> tuple[str, str, dict[str, Any] | None]:
        """What a page asks a passkey to sign to accept `eid` with `content`: the options (JSON), the single-use
        nonce they are bound to, and the content as it will be accepted (its defaults filled in), which the page
        sends back with the assertion."""
        q, _ = await self.get(eid)
        if not q.presence:
            raise Forbidden(f"{eid} needs no passkey: accept it as any other question")
        if q.state != "pending":
            raise rules.ended_error(q, None)
        clean = approvals.content_of(q) if q.approvals is not None else rules.checked_content(q, "accept", content)
        nonce = self.nonces.issue(eid)
        return passkeys.authentication_options(q, clean, nonce, rp_id), nonce, clean
