"""The broker: open a question, answer it once, wait for it, expire it, abandon it.

It knows nothing of MCP or HTTP. An asker in this process holds a `Handle` and is woken
the moment an answer commits (no polling), or, if it asked `eager` on a store this daemon alone
writes, the moment the answer is decided (`answer`); everyone else reads through the broker or
follows the event bus. It is the only part that holds the store: what else is durable (a call task's
record, a fact learnt about a server) goes through it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from mcpx import wirejson
from mcpx.broker import policy, routing
from mcpx.broker.credentials import secret_fields
from mcpx.broker.documents import task_row
from mcpx.broker.errors import (
    AlreadyAnswered,
    BrokerError,
    Forbidden,
    Gone,
    InvalidContent,
    InvalidId,
    NotFound,
    QuestionEnded,
)
from mcpx.broker.errors import (
    InvalidQuestion as InvalidQuestion,  # where upstream/calls.py has always found it
)
from mcpx.broker.events import EventBus
from mcpx.broker.models import (
    REDACTED,
    Action,
    Answer,
    AuditKind,
    AuditRecord,
    Elicitation,
    OpenRequest,
    State,
    StoredTask,
    TaskState,
    rfc3339,
    seconds_left,
)
from mcpx.broker.pending import PendingIndex
from mcpx.broker.schema import SchemaProblem, check_schema, validate_content
from mcpx.broker.store import AuditFilter, Lease, QuestionFilter, QuestionRow, Store, StoreInfo, Tx
from mcpx.config import Config
from mcpx.ids import is_id, new_id

log = logging.getLogger("mcpx.broker")
T = TypeVar("T")

ALL = 2**62  # a read's limit that is no limit
# how long a record nobody waits on (behind a result or an answer already delivered) may wait for the next
# commit to ride with: at most this much of them is lost to a kill -9, and a stream of them costs a commit each
# this often instead of one each
BEHIND = 0.05
# questions answered through this daemon lately, kept as stored: a waiter that asks just after the answer (a
# long-poll that lost the race with it) is served from memory, not the store; an answer never changes
RECENT = 128


class Settings(Protocol):
    """Where the broker reads the config in force (a ConfigSource): TTLs and the policy, at each question."""

    @property
    def config(self) -> Config: ...


def _ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _ms(epoch: float) -> datetime:
    """An audit record's time: to the millisecond, as the log has always kept it."""
    moment = _ts(epoch)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def redact(content: dict[str, Any] | None, secret: Collection[str]) -> dict[str, Any] | None:
    if content is None or not secret:
        return content
    return {k: (REDACTED if k in secret else v) for k, v in content.items()}


def as_stored(answer: Answer, secret: Collection[str]) -> Answer:
    """An answer as the store keeps it and every reader but its asker sees it: a credential's value [redacted]. The
    answer itself when it has none to hide (answers are never changed in place), not a copy."""
    if not answer.content or not secret:
        return answer
    return answer.model_copy(update={"content": redact(answer.content, secret)})


@dataclass(frozen=True)
class Outcome:
    """What a unit of work on one question leaves for the broker to act on once it has committed.

    A refusal is returned, not raised, so that what the unit did on the way (an expiry) commits.
    """

    question: Elicitation | None  # as it stands after the unit; None when there is no such question
    answer: Answer | None = None  # given now: whoever waits is woken with it
    expired: Answer | None = None  # it ran out of time on the way: the expiry's answer wakes them instead
    ended: QuestionEnded | None = None  # it ended unanswered (policy error): whoever waits is told so
    refusal: BrokerError | None = None  # why the answer was refused: raised once the unit has committed

    def settled(self) -> Elicitation:
        if self.refusal is not None:
            raise self.refusal
        assert self.question is not None, "a unit returns no question only with a refusal"
        return self.question


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
        self._shared = shared
        self._own = own

    @property
    def id(self) -> str:
        return self.elicitation.id

    def done(self) -> bool:
        return self._shared.done() or (self._own is not None and self._own.done())

    async def answer(self) -> Answer:
        """The answer (expiry answers cancel); raises QuestionEnded when the question was abandoned."""
        if self._own is None:
            self._own = _told_by(self._shared)
        return await self._own


def _abandoned(eid: str, q: Elicitation) -> Gone:
    """A long poll's 410 for a question that was abandoned."""
    return Gone(f"{eid} was abandoned: {q.state_reason or 'its asker went away'}", state="abandoned")


def _told_by(shared: asyncio.Future[Answer]) -> asyncio.Future[Answer]:
    """A future of an asker's own, told whatever `shared` is told (unless it was told first)."""
    own: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
    own.add_done_callback(_retrieved)
    shared.add_done_callback(functools.partial(_pass_on, own))
    return own


def _pass_on(mine: asyncio.Future[Answer], shared: asyncio.Future[Answer]) -> None:
    """The question's outcome, on to an asker's own future (unless it has one already: it was answered first)."""
    if mine.done():
        return
    if shared.cancelled():
        mine.cancel()
    elif (exc := shared.exception()) is not None:
        mine.set_exception(exc)
    else:
        mine.set_result(shared.result())


class _Moves:
    """A unit that may end (or escalate) these questions: while one is queued or committing, none of them is
    answered from memory (Broker._deliver_first), since what the store will hold is not yet known."""

    __slots__ = ("eids", "unit")

    def __init__(self, eids: Collection[str], unit: Callable[[Tx], Any]) -> None:
        self.eids = eids
        self.unit = unit

    def __call__(self, tx: Tx) -> Any:
        return self.unit(tx)


def _retrieved(f: asyncio.Future[Any]) -> None:
    """Its failure was logged where it happened: nobody need await it."""
    if not f.cancelled():
        f.exception()


class _RecordUnit:
    """Broker._submit_record's unit of work and its outcome: one object while it waits for its commit, where a
    closure and its cells were a dozen that the garbage collector tracks (a stream of plain calls keeps a
    horizon's worth of these alive, and they are most of its young generation: docs/bench.md)."""

    __slots__ = ("broker", "data", "elicit", "kind", "out", "pid", "recorded", "session", "task", "trace",
                 "with_unit")

    def __init__(self, broker: Broker, kind: AuditKind, data: dict[str, Any], elicit: str | None,
                 session: str | None, trace: str | None, task: str | None, pid: int | None,
                 with_unit: Callable[[Tx], None] | None) -> None:
        self.broker, self.kind, self.data, self.pid, self.with_unit = broker, kind, data, pid, with_unit
        self.elicit, self.session, self.trace, self.task = elicit, session, trace, task
        self.out: list[AuditRecord] = []
        self.recorded: asyncio.Future[AuditRecord] = asyncio.get_running_loop().create_future()

    def __call__(self, tx: Tx) -> None:
        if self.with_unit is not None:
            self.with_unit(tx)
        self.broker._audit(tx, self.out, self.kind, time.time(), None, self.data, self.pid, elicit=self.elicit,
                           session=self.session, trace=self.trace, task=self.task)

    def published(self, f: asyncio.Future[None]) -> None:
        recorded = self.recorded
        # a cancelled future has no exception to give: asking it for one raises, here in a callback, and the
        # record's own future would never resolve
        failure: BaseException | None = asyncio.CancelledError() if f.cancelled() else f.exception()
        if failure is not None:
            log.error("recording %s failed: %s", self.kind, "cancelled" if f.cancelled() else failure)
            if not recorded.done():
                recorded.set_exception(failure)
            return
        if not recorded.done():
            recorded.set_result(self.out[0])


class Broker:
    def __init__(self, store: Store, settings: Settings, pid: int | None = None) -> None:
        self._store = store
        self.bus = EventBus()
        self._settings = settings
        self.pid = pid or os.getpid()
        self._futures: dict[str, asyncio.Future[Answer]] = {}
        self._deadlines: list[tuple[float, str]] = []
        self._wake = asyncio.Event()
        self._sweeper: asyncio.Task[None] | None = None
        self._settling: set[asyncio.Task[Any]] = set()  # work of the broker's own, cancelled at stop
        # a store a team shares: answers say which daemon's user and host they came through, and a credential
        # is taken only by the daemon whose asker holds the question (nothing else could carry it)
        self._me = store.info.daemon
        self._asked: set[str] = set()
        # questions whose own client is asked before their commit is queued (open's `committing`): an answer to one
        # waits here until it is queued, so that it commits behind it whatever the loop runs first
        self._queuing: dict[str, asyncio.Future[None]] = {}
        self._pending = PendingIndex()  # listings and secondsLeft are served from here, in step with the store
        self._recent: dict[str, tuple[Elicitation, Answer]] = {}  # oldest first, at most RECENT
        self._answered: dict[str, tuple[Elicitation, Answer]] = {}  # written by a unit, to _recent once committed
        # the askers that may take their answer before it commits (open's `eager`): a store this daemon alone
        # writes, and a legacy call's question (nothing re-drives such a call after a restart)
        self._eager: dict[str, asyncio.Future[Answer]] = {}
        store.follow(self._committed)

    # ---- lifecycle

    async def start(self) -> None:
        # a shared store's other daemons go on writing while this reads: what they move meanwhile is handed on
        # with newer rows than this read may return
        self._pending.begin_fill()
        self._pending.fill(await self._store.question_rows(QuestionFilter(state="pending"), ALL))
        for expires, eid in self._pending.deadlines():
            self._future_for(eid)
            heapq.heappush(self._deadlines, (expires, eid))
        self._sweeper = asyncio.create_task(self._sweep(), name="mcpx-sweeper")

    async def stop(self) -> None:
        for task in list(self._settling):
            task.cancel()
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.wait({self._sweeper})  # its end, without taking a cancel of stop() itself for it
            self._sweeper = None

    def _in_background(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        """Work of the broker's own that nobody awaits: held until done (the loop keeps only weak references),
        cancelled at stop; what it raises was logged where it happened."""
        task = asyncio.create_task(work, name=name)
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        task.add_done_callback(_retrieved)

    def _future_for(self, eid: str) -> asyncio.Future[Answer]:
        fut = self._futures.get(eid)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            # an abandoned question nobody awaits must not log "exception never retrieved"
            fut.add_done_callback(_retrieved)
            self._futures[eid] = fut
        return fut

    def handle(self, eid: str, elicitation: Elicitation) -> Handle | None:
        """Re-attach to a pending question after a restart (modern-era calls re-driven)."""
        fut = self._futures.get(eid)
        return Handle(elicitation, fut) if fut is not None else None

    def _eager_asker(self, eid: str, shared: asyncio.Future[Answer], eager: bool) -> asyncio.Future[Answer] | None:
        """For an `eager` asker on a store this daemon alone writes, its own future, which an answer may be handed
        to before it commits (answer's `_deliver_first`); else None (the asker's future is made as it waits)."""
        if not eager or self._me is not None:
            return None
        mine = _told_by(shared)
        self._eager[eid] = mine
        mine.add_done_callback(lambda _f: self._eager.pop(eid, None) if self._eager.get(eid) is mine else None)
        return mine

    def _write(self, eids: Collection[str], unit: Callable[[Tx], T], within: float = 0.0) -> asyncio.Future[T]:
        """Queue a unit that may end or escalate the questions `eids`."""
        return self._store.submit(_Moves(eids, unit), within)

    def _moving(self, eid: str) -> bool:
        """Whether a unit that may end or escalate `eid` was queued and has not yet committed."""
        return self._store.holds(lambda u: isinstance(u, _Moves) and eid in u.eids)

    # ---- records

    def _audit(self, tx: Tx, out: list[AuditRecord], kind: AuditKind, at: float, q: Elicitation | None,
               data: dict[str, Any], pid: int | None = None, *, exact_pid: bool = False,
               elicit: str | None = None, session: str | None = None, trace: str | None = None,
               task: str | None = None) -> None:
        """`pid` None is mcpx's own doing (the daemon's pid), unless `exact_pid`: then nobody's known pid."""
        if q is not None:
            elicit, session, trace, task = q.id, q.session, q.trace, q.task
        record = AuditRecord(seq=0, at=_ms(at), kind=kind, elicit=elicit, session=session, trace=trace, task=task,
                             pid=pid if pid is not None or exact_pid else self.pid, data=data)
        out.append(tx.audit(record))  # as the log holds it: with its seq

    def _committed(self, records: list[AuditRecord], ours: bool, rows: list[QuestionRow]) -> None:
        """Every committed record, in the log's order, from the store: on to the bus; another daemon's
        transitions of a shared store also reach this daemon's sweeper and waiters. The questions they
        touched are in the pending index first, so whoever hears of a question finds it listed."""
        self._pending.apply(rows)
        for record in records:
            if ours and record.kind == "elicit.answered" and record.elicit is not None:
                self._remember(record.elicit)
            self.bus.publish(record)
            if not ours:
                self._heard(record)

    def _remember(self, eid: str) -> None:
        """A question this daemon's unit answered has committed: into _recent, in the same loop turn as it leaves
        the pending index, so a read in between finds it there."""
        answered = self._answered.pop(eid, None)
        if answered is not None:
            self._recent[eid] = answered
            if len(self._recent) > RECENT:
                del self._recent[next(iter(self._recent))]

    def _heard(self, record: AuditRecord) -> None:
        """Another daemon opened, answered or ended a question: what this daemon does about it."""
        eid = record.elicit
        if eid is None:
            return
        if record.kind == "elicit.open" and "expiresAt" in record.data:
            self._future_for(eid)
            heapq.heappush(self._deadlines, (datetime.fromisoformat(record.data["expiresAt"]).timestamp(), eid))
            if self._deadlines[0][1] == eid:
                self._wake.set()
        elif record.kind in ("elicit.answered", "elicit.expired") and eid in self._futures:
            self._in_background(self._settle(eid), f"mcpx-settle-{eid}")
        elif record.kind == "elicit.abandoned":
            self._end_unanswered(eid, str(record.data.get("reason") or ""))

    async def _settle(self, eid: str) -> None:
        """Wake this daemon's asker or waiter with an answer another daemon committed (as stored: redacted)."""
        try:
            found = await self._store.question(eid)
        except Exception:
            log.exception("reading %s's answer from the store failed", eid)
            return
        if found is not None and found[1] is not None:
            self._wake_asker(eid, found[1])

    def _submit_record(self, kind: AuditKind, data: dict[str, Any], *, elicit: str | None = None,
                       session: str | None = None, trace: str | None = None, task: str | None = None,
                       pid: int | None = None, with_unit: Callable[[Tx], None] | None = None,
                       within: float = 0.0) -> asyncio.Future[AuditRecord]:
        """A transition that is not a question's own (elicit.resumed, task.done), queued now.

        `with_unit` writes in the same transaction (a task's final state beside its task.done); `within`: the
        record may wait that long for company (broker/commits.py). The record is published once committed;
        await the future to know when that is.
        """
        unit = _RecordUnit(self, kind, data, elicit, session, trace, task, pid, with_unit)
        self._store.submit(unit, within).add_done_callback(unit.published)
        unit.recorded.add_done_callback(_retrieved)
        return unit.recorded

    # ---- open

    def _build(self, req: OpenRequest, now: float) -> tuple[Elicitation, routing.Route]:
        # what is stored and shown must be text: a lone surrogate could be neither written nor typed back
        where = wirejson.lone_surrogate({"message": req.message, "requestedSchema": req.requested_schema,
                                         "url": req.url, "session": req.session, "server": req.server,
                                         "tool": req.tool, "elicitationId": req.upstream_id})
        if where is not None:
            raise InvalidQuestion(f"{where} {wirejson.SURROGATE_PROBLEM}", fields={where: wirejson.SURROGATE_PROBLEM})
        if req.mode == "form":
            schema = req.requested_schema if req.requested_schema is not None else {"type": "object", "properties": {}}
            try:
                check_schema(schema)
            except SchemaProblem as exc:
                raise InvalidQuestion(f"requestedSchema is not the flat schema form mode allows: {exc}") from None
            if req.url is not None:
                raise InvalidQuestion("a form-mode question takes requestedSchema, not url")
        else:
            schema = None
            if not req.url or not req.url.startswith(("https://", "http://")):
                raise InvalidQuestion("a url-mode question needs an http(s) url")
            if req.requested_schema is not None:
                raise InvalidQuestion("a url-mode question takes url, not requestedSchema")
        if not req.message or not req.message.strip():
            raise InvalidQuestion("message is required: the words the person or agent will read")
        ttl = req.ttl if req.ttl is not None else self._settings.config.ttl_for(req.server)
        secrets = sorted(secret_fields(schema))  # decided once: the question carries them from here on
        decided = routing.route(req.mode, schema, req.message, req.meta, req.audience, secrets)
        q = Elicitation(
            id=new_id("elc"), trace=req.trace, parent=req.parent, task=req.task, session=req.session,
            session_source=req.session_source, server=req.server, tool=req.tool, mode=req.mode,
            message=req.message, requested_schema=schema, url=req.url, upstream_id=req.upstream_id,
            audience=decided.audience, reason=decided.reason, created=_ts(now), expires_at=_ts(now + ttl),
            state="pending", ambiguous=req.ambiguous,
            secret_fields=secrets,
        )
        return q, decided

    async def open(self, req: OpenRequest, task: Callable[[Elicitation, bool], StoredTask] | None = None,
                   committing: Callable[[Handle], Awaitable[None]] | None = None, eager: bool = False) -> Handle:
        """Open a question. `task`: the asking call's record as it stands with this question open (pending, or
        settled at once by the policy), stored in the question's own commit, so a restart knows of the question
        exactly when anyone can.

        `committing`: told of the question just before its commit is queued, if the policy leaves it pending, so
        that the one client that is to be asked (a legacy call's own) is asked first and reads it while it
        commits. Nothing else hears of it before the commit, and an answer to it commits after it (one queue,
        in order). If the commit fails, the handle
        it was given ends (QuestionEnded) and the failure is raised here.

        `eager`: the asker may be handed its answer before the answer commits, on a store this daemon alone writes
        (see `answer`). Only for a legacy call's question: such a call does not outlive its daemon, so nothing
        could re-send what its server was told; a call that may be re-driven after a restart is told only what
        the store holds."""
        now = time.time()
        q, decided = self._build(req, now)
        decision, _checks = policy.evaluate(self._settings.config.elicit, q, mode=req.policy_mode)
        records: list[AuditRecord] = []
        expires = q.expires_at.timestamp()
        stored_task = task(q, decision is None) if task is not None else None

        def unit(tx: Tx) -> Outcome:
            tx.insert_question(q)
            if stored_task is not None:
                tx.put_task(stored_task)
            data: dict[str, Any] = {"server": q.server, "tool": q.tool, "mode": q.mode, "audience": q.audience,
                                    "reason": q.reason, "expiresAt": rfc3339(q.expires_at)}
            if decided.hint_ignored:
                data["hintIgnored"] = decided.hint_ignored
            if q.ambiguous:
                data["ambiguous"] = True
            self._audit(tx, records, "elicit.open", now, q, data, req.pid)
            if decision is None:
                return Outcome(q)
            self._audit(tx, records, "policy.fired", now, q,
                        {"rule": decision.source, "action": decision.action or "error", "because": decision.because})
            if decision.fail:
                ended_q = q.model_copy(update={"state": "abandoned", "state_reason": decision.because})
                tx.update_question(ended_q)
                self._audit(tx, records, "elicit.abandoned", now, ended_q, {"reason": decision.because})
                return Outcome(ended_q, ended=QuestionEnded(q.id, "abandoned", decision.because))
            assert decision.action is not None
            content = decision.content
            if content is not None:
                content, _ = validate_content(q.requested_schema, content)
            answer, answered_q = self._commit_answer(tx, records, q, decision.action, content, decision.by, None,
                                                     self.pid, decision.because, now,
                                                     q.secret_fields)
            return Outcome(answered_q, answer)

        told: asyncio.Future[Answer] | None = None
        mine: asyncio.Future[Answer] | None = None
        written: asyncio.Future[Outcome] | None = None
        try:
            if committing is not None and decision is None:
                told = self._future_for(q.id)
                mine = self._eager_asker(q.id, told, eager)
                if self._me is not None and q.secret_fields:
                    self._asked.add(q.id)  # its credential may be accepted here: an answer may be in the same batch
                # the one client to be asked is asked first, and the commit queued as it returns: the commit runs
                # while that client reads the question. An answer that comes sooner waits on _queuing, and so
                # commits behind the question, as any answer does.
                queued = self._queuing[q.id] = asyncio.get_running_loop().create_future()
                try:
                    await committing(Handle(q, told, mine))
                    written = self._store.submit(unit)
                finally:
                    del self._queuing[q.id]
                    queued.set_result(None)
            else:
                written = self._store.submit(unit)
            outcome = await written
        except BaseException as exc:
            # a failed commit, or a stop before anything was queued: the client asked meanwhile hears it ended
            if told is not None and (written is None or isinstance(exc, Exception)):
                self._asked.discard(q.id)
                if self._futures.pop(q.id, None) is told and not told.done():
                    told.set_exception(QuestionEnded(q.id, "abandoned", f"it could not be stored: "
                                                                        f"{exc or type(exc).__name__}"))
            raise
        q, answer, ended = outcome.settled(), outcome.answer, outcome.ended
        # the future the early handle holds, even if an answer committed right behind the question already took
        # it out of the table
        fut = told if told is not None else self._future_for(q.id)
        if self._me is not None and q.secret_fields and q.state == "pending":
            self._asked.add(q.id)
        if answer is not None:
            self._wake_asker(q.id, answer)
        elif ended is not None:
            self._futures.pop(q.id, None)
            fut.set_exception(ended)
        else:
            heapq.heappush(self._deadlines, (expires, q.id))
            if self._deadlines[0][1] == q.id:
                self._wake.set()
        # the subscribers were woken by the commit before this was (broker/commits.py): the news of a question
        # goes out before the reply to whoever opened it
        if mine is None:
            mine = self._eager_asker(q.id, fut, eager and q.state == "pending")
        return Handle(q, fut, mine)

    # ---- answer

    def _commit_answer(self, tx: Tx, records: list[AuditRecord], q: Elicitation, action: Action,
                             content: dict[str, Any] | None, by: str, session: str | None, pid: int | None,
                             reason: str | None, now: float, secret: Collection[str],
                             state: State = "answered") -> tuple[Answer, Elicitation]:
        answer = self._answer_of(q, action, content, by, session, pid, reason, now)
        return answer, self._write_answer(tx, records, q, answer, secret, state)

    def _answer_of(self, q: Elicitation, action: Action, content: dict[str, Any] | None, by: str,
                   session: str | None, pid: int | None, reason: str | None, now: float) -> Answer:
        return Answer(
            id=q.id, action=action, content=content, by=by, at=_ts(now), session=session, pid=pid,
            user=self._me.user if self._me else None, host=self._me.host if self._me else None,
            answered_after_ms=max(0, int((now - q.created.timestamp()) * 1000)), reason=reason,
        )

    def _write_answer(self, tx: Tx, records: list[AuditRecord], q: Elicitation, answer: Answer,
                      secret: Collection[str], state: State = "answered") -> Elicitation:
        """`answer` to pending `q`, written: the question as it now stands."""
        stored = as_stored(answer, secret)
        q = q.model_copy(update={"state": state})
        if not tx.update_question(q):
            raise AlreadyAnswered(f"{q.id} was answered a moment ago")  # unreachable: units never interleave
        tx.insert_answer(stored)
        kind: AuditKind = "elicit.expired" if state == "expired" else "elicit.answered"
        data = {"action": answer.action, "by": answer.by, "answeredAfterMs": stored.answered_after_ms}
        if self._me is not None:
            data.update(user=self._me.user, host=self._me.host)
        if stored.content is not None:
            data["content"] = stored.content
        if answer.reason:
            data["reason"] = answer.reason
        self._audit(tx, records, kind, answer.at.timestamp(), q, data, answer.pid, exact_pid=True)  # who answered
        return q

    def _write_answered(self, tx: Tx, records: list[AuditRecord], q: Elicitation, answer: Answer) -> Elicitation:
        """Someone's answer to pending `q`, written, its stored copy left for _recent (taken there as it commits)."""
        answered = self._write_answer(tx, records, q, answer, q.secret_fields)
        self._answered[q.id] = (answered, as_stored(answer, q.secret_fields))
        return answered

    async def answer(self, eid: str, action: Action, content: dict[str, Any] | None = None, *, by: str,
                     session: str | None = None, pid: int | None = None, reason: str | None = None,
                     acknowledged: bool = True) -> tuple[Elicitation, Answer | None]:
        """Answer a question. Returns (question, answer), once the answer has committed; answer is None when an
        agent's decline escalated it.

        `acknowledged` False: whoever answered is told nothing back (an MCP client's reply to elicitation/create
        has no reply of its own), so an answer its asker is handed before it commits (`_deliver_first`) may wait
        for company: it commits with the next commit (the call's end, its next question) or within BEHIND."""
        if not is_id(eid, "elc"):
            raise InvalidId(f"{eid!r} is not a question id (they look like elc- and 16 hex digits)")
        if (where := wirejson.lone_surrogate({"content": content, "reason": reason})) is not None:
            raise InvalidContent(f"the answer does not fit the question: {where} {wirejson.SURROGATE_PROBLEM}",
                                 {where: wirejson.SURROGATE_PROBLEM})
        if (queued := self._queuing.get(eid)) is not None:
            await queued  # its question is being asked of its own client: its commit is queued first
        now = time.time()
        mine = self._eager.get(eid)
        if (mine is not None and not mine.done() and (pending := self._pending.get(eid)) is not None
                and not self._moving(eid)):
            first = self._deliver_first(pending.question(), mine, action, content, by, session, pid, reason, now,
                                        0.0 if acknowledged else BEHIND)
            if first is not None:
                landing, given = first
                # shielded: a caller that stops waiting (a call's driver ends as its call does) leaves the landing
                # to the store's future, which wakes the long polls once committed (_landed)
                return await asyncio.shield(landing), given
        records: list[AuditRecord] = []

        def unit(tx: Tx) -> Outcome:
            q = tx.question(eid)
            if q is None:
                return Outcome(None, refusal=NotFound(f"no question {eid}"))
            if q.state == "pending" and now >= q.expires_at.timestamp():
                expired = self._expire_in(tx, records, q, now)
                return Outcome(q, expired=expired,
                               refusal=self._ended_error_of(q.model_copy(update={"state": "expired"}), None))
            if q.state != "pending":
                return Outcome(q, refusal=self._ended_error_of(q, tx.answer(q.id)))
            refusal = self._refusal(q, action, by, session) or self._elsewhere(q, action)
            if refusal is not None:
                return Outcome(q, refusal=refusal)
            if self._escalates(q, action, by):
                return Outcome(self._escalate_in(tx, records, q, by, reason, now, pid))
            try:
                clean = self._checked_content(q, action, content)
            except InvalidContent as exc:
                return Outcome(q, refusal=exc)
            answer = self._answer_of(q, action, clean, by, session, pid, reason, now)
            return Outcome(self._write_answered(tx, records, q, answer), answer)

        try:
            outcome = await self._write((eid,), unit)
        finally:
            self._answered.pop(eid, None)  # the commit failed; or it went to _recent as it committed
        for reached in (outcome.expired, outcome.answer):
            if reached is not None:
                self._wake_asker(eid, reached)
        return outcome.settled(), outcome.answer

    def _deliver_first(self, q: Elicitation, mine: asyncio.Future[Answer], action: Action,
                       content: dict[str, Any] | None, by: str, session: str | None, pid: int | None,
                       reason: str | None, now: float, within: float,
                       ) -> tuple[asyncio.Future[Elicitation], Answer] | None:
        """The answer to a pending question whose asker is eager, handed to the asker before it commits: a legacy
        server has it while the commit runs, not after (issue 14: no commit between an answer and the upstream).
        The answer's commit, and the answer. Or None, if it is not that simple (the question ran out of time, an
        agent's decline escalates it): then the answer takes the usual way.

        Safe because the store is this daemon's alone and nothing queued may move the question (`_moving`): the
        question as the pending index holds it is the question as the store holds it, and the answer's unit is
        queued in this same step, ahead of any other, so the answer given here is the one the store will hold.
        Whoever answered still hears back only after the commit. The asker's own future is set first, so the
        asker's turn (the reply written upstream) comes before the commit's. Were the daemon killed in between,
        the question would be found pending and abandoned with its call (the server had the answer, the store
        never did): docs/architecture.md, "What is written when"."""
        if now >= q.expires_at.timestamp():
            return None
        if self._escalates(q, action, by):
            return None
        refusal = self._refusal(q, action, by, session)
        if refusal is not None:
            raise refusal
        clean = self._checked_content(q, action, content)
        answer = self._answer_of(q, action, clean, by, session, pid, reason, now)
        records: list[AuditRecord] = []

        def unit(tx: Tx) -> Elicitation:
            return self._write_answered(tx, records, q, answer)

        mine.set_result(answer)  # before the unit is queued: the asker's turn comes before the commit's
        written = self._write((q.id,), unit, within)
        written.add_done_callback(functools.partial(self._landed, q.id, answer))
        return written, answer

    def _landed(self, eid: str, answer: Answer, written: asyncio.Future[Elicitation]) -> None:
        """An answer its asker already had has committed, or failed to: the long polls are woken with it; or the
        question is abandoned, since the server acted on an answer the store does not hold (left pending, it
        would expire to a cancel the server never saw)."""
        self._answered.pop(eid, None)  # committed: it went to _recent as it did; failed: it never will
        if written.cancelled():
            return  # not by the broker: it awaits it shielded
        exc = written.exception()
        if exc is None:
            self._wake_asker(eid, answer)
            return
        why = f"its answer reached the server but could not be stored: {exc}"
        log.error("%s: %s", eid, why)
        self._in_background(self.abandon(eid, why), f"mcpx-abandon-{eid}")

    @staticmethod
    def _ended_error_of(q: Elicitation, answer: Answer | None) -> BrokerError:
        if q.state == "answered":
            prior = answer.wire() if answer is not None else {}
            return AlreadyAnswered(
                f"{q.id} is already answered ({prior.get('by')}, {prior.get('at')}, {prior.get('action')}); "
                "the first answer stands", answer=prior)
        if q.state == "expired":
            return Gone(f"{q.id} expired at {rfc3339(q.expires_at)}; nobody answered in time, so it was answered "
                        "cancel", state="expired", expiresAt=rfc3339(q.expires_at))
        return Gone(f"{q.id} was abandoned: {q.state_reason or 'its asker went away'}", state="abandoned",
                    reason=q.state_reason)

    @staticmethod
    def _refusal(q: Elicitation, action: Action, by: str, session: str | None) -> BrokerError | None:
        if session is not None and session != q.session:
            return Forbidden(f"{q.id} belongs to session {q.session}, not {session}; a question is answered only "
                             "from the session that raised it")
        if by.startswith("agent:") and q.audience == "human":
            return Forbidden(
                f"{q.id} is for the person, not the agent ({q.reason}). The person has been asked; do not answer "
                "it. Wait for the call's result instead.", audience=q.audience)
        return None

    def _elsewhere(self, q: Elicitation, action: Action) -> BrokerError | None:
        """A credential accepted on another daemon than the asker's could reach the asker only as [redacted]."""
        if self._me is None or not q.secret_fields or action != "accept" or q.id in self._asked:
            return None
        return Forbidden(
            f"{q.id} asks for a credential ({', '.join(q.secret_fields)}), which mcpx never stores nor sends between "
            "daemons: accept it through the daemon whose call raised it (decline and cancel work from anywhere)",
            audience=q.audience)

    @staticmethod
    def _checked_content(q: Elicitation, action: Action, content: dict[str, Any] | None) -> dict[str, Any] | None:
        if action != "accept":
            if content:
                raise InvalidContent(f"content goes only with accept, not {action}",
                                     {"content": f"not allowed with {action}"})
            return None
        if q.mode == "url":
            if content:
                raise InvalidContent("a url-mode question is accepted without content",
                                     {"content": "not allowed in url mode"})
            return None
        filled, problems = validate_content(q.requested_schema, content)
        if problems:
            listed = "; ".join(f"{k}: {v}" for k, v in problems.items())
            raise InvalidContent(f"the answer does not fit the question: {listed}", problems)
        return filled

    @staticmethod
    def _escalates(q: Elicitation, action: Action, by: str) -> bool:
        """An agent's decline of a question it may answer first: the person is asked instead."""
        return by.startswith("agent:") and action == "decline" and q.audience == "agent-then-human"

    def _escalate_in(self, tx: Tx, records: list[AuditRecord], q: Elicitation, by: str, reason: str | None,
                     now: float, pid: int | None) -> Elicitation:
        why = reason or "the agent gave no reason"
        q = q.model_copy(update={
            "audience": "human", "escalated": True,
            "state_reason": f"the agent declined: {why}",
            "reason": f"the agent declined ({why}), so the person is asked",
        })
        tx.update_question(q)
        self._audit(tx, records, "elicit.escalated", now, q,
                    {"by": by, "reason": why, "from": "agent-then-human", "to": "human"}, pid, exact_pid=True)
        return q

    def _wake_asker(self, eid: str, answer: Answer) -> None:
        """Wake whoever waits on the question (its asker, its long polls) once the answer has committed (an eager
        asker may have it already: _deliver_first)."""
        self._asked.discard(eid)
        fut = self._futures.pop(eid, None)
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def _end_unanswered(self, eid: str, reason: str) -> None:
        """A question abandoned (here, by a take-over, or on another daemon): whoever waits on it hears it ended, and
        nothing of it is kept — its future, and the mark that this daemon asked it (_asked)."""
        self._asked.discard(eid)
        fut = self._futures.pop(eid, None)
        if fut is not None and not fut.done():
            fut.set_exception(QuestionEnded(eid, "abandoned", reason))

    # ---- expiry and abandonment

    def _expire_in(self, tx: Tx, records: list[AuditRecord], q: Elicitation, now: float) -> Answer:
        answer, _ = self._commit_answer(
            tx, records, q, "cancel", None, "expiry", None, self.pid,
            f"nobody answered by {rfc3339(q.expires_at)}", now, set(), state="expired")
        return answer

    async def expire_due(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        taken: list[tuple[float, str]] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            taken.append(heapq.heappop(self._deadlines))
        if not taken:
            return 0
        due = [eid for _, eid in taken]
        records: list[AuditRecord] = []

        def unit(tx: Tx) -> list[tuple[str, Answer]]:
            out = []
            for eid in due:
                q = tx.question(eid)
                if q is not None and q.state == "pending":
                    out.append((eid, self._expire_in(tx, records, q, now)))
            return out

        try:
            expired = await self._write(due, unit)
        except BaseException:
            # not written (the store busy past its timeout, PostgreSQL away, the daemon stopping): the deadlines go
            # back on the heap, or the sweeper's retry would find nothing due and these would stay pending forever
            for entry in taken:
                heapq.heappush(self._deadlines, entry)
            raise
        for eid, answer in expired:
            self._wake_asker(eid, answer)
        return len(expired)

    async def _sweep(self) -> None:
        """Expire questions at their deadline whether or not anything reads them."""
        while True:
            try:
                await self.expire_due()
            except Exception:  # a failed sweep must not end sweeping
                log.exception("expiring questions failed; retrying")
                await asyncio.sleep(1)
                continue
            self._wake.clear()
            delay = (self._deadlines[0][0] - time.time()) if self._deadlines else 3600.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, min(delay, 3600.0)))

    async def abandon(self, eid: str, reason: str) -> bool:
        """The asker went away; the question ends without an answer. False if it had already ended."""
        records: list[AuditRecord] = []
        now = time.time()

        def unit(tx: Tx) -> bool:
            q = tx.question(eid)
            if q is None or q.state != "pending":
                return False
            q = q.model_copy(update={"state": "abandoned", "state_reason": reason})
            tx.update_question(q)
            self._audit(tx, records, "elicit.abandoned", now, q, {"reason": reason})
            return True

        if not await self._write((eid,), unit):
            return False
        self._end_unanswered(eid, reason)
        return True

    async def take_over(self, task: StoredTask, owner: str, reason: str) -> list[str]:
        """End a call of a daemon whose lease lapsed: its pending questions abandoned with `reason`, the task
        failed with its task.done, in one transaction that only one daemon of the team gets to commit.
        The questions abandoned; [] when another daemon took it over first."""
        tid = task.id
        pending = [q.id for q in await self.questions(QuestionFilter(task=tid, state="pending"))]
        records: list[AuditRecord] = []
        now = time.time()
        ended = task.model_copy(update={"state": "failed", "error": reason, "open": [], "resume": None,
                                        "updated": _ts(now)})

        def unit(tx: Tx) -> list[str] | None:
            if not tx.claim_task(tid, owner):
                return None
            gone = []
            for eid in pending:
                q = tx.question(eid)
                if q is not None and q.state == "pending":
                    q = q.model_copy(update={"state": "abandoned", "state_reason": reason})
                    tx.update_question(q)
                    self._audit(tx, records, "elicit.abandoned", now, q, {"reason": reason})
                    gone.append(eid)
            tx.put_task(ended)
            self._audit(tx, records, "task.done", now, None,
                        {"state": "failed", "server": task.server, "tool": task.tool, "error": reason},
                        session=task.session, trace=task.trace, task=tid)
            return gone

        gone = await self._write(pending, unit)
        for eid in gone or []:
            self._end_unanswered(eid, reason)
        return gone or []

    async def lapsed_tasks(self, states: tuple[TaskState, ...]) -> list[tuple[Lease, StoredTask]]:
        return await self._store.lapsed_tasks(states)

    async def daemons(self) -> list[Lease]:
        return await self._store.daemons()

    @property
    def store_info(self) -> StoreInfo:
        return self._store.info

    def mark_resumed(self, q: Elicitation, data: dict[str, Any]) -> None:
        """Recorded behind the answer's delivery: queued by a loop callback, once the asker's step is over (its
        reply to the server written: a legacy asker is told right before it writes), and committed with the next
        commit, within BEHIND; neither the asker nor the store waits for it."""
        asyncio.get_running_loop().call_soon(functools.partial(
            self._submit_record, "elicit.resumed", data, elicit=q.id, session=q.session, trace=q.trace, task=q.task,
            within=BEHIND))

    # ---- reads

    async def get(self, eid: str) -> tuple[Elicitation, Answer | None]:
        if not is_id(eid, "elc"):
            raise InvalidId(f"{eid!r} is not a question id (they look like elc- and 16 hex digits)")
        pending = self._pending.get(eid)
        if pending is not None:  # pending: no answer yet, in memory (an ended question is read from the store)
            return pending.question(), None
        recent = self._recent.get(eid)
        if recent is not None:  # answered a moment ago through this daemon, and for good
            return recent
        found = await self._store.question(eid)
        if found is None:
            raise NotFound(f"no question {eid}")
        return found

    async def questions(self, where: QuestionFilter, limit: int = 10000) -> list[Elicitation]:
        """Questions oldest first; pending ones from memory."""
        if where.state == "pending":
            return [p.question() for p in self._pending.select(where, limit)]
        return [Elicitation.model_validate_json(row.doc) for row in await self._store.question_rows(where, limit)]

    def question_json(self, q: Elicitation) -> bytes:
        """`q`'s document as the API shows it: a pending question's as stored, with its secondsLeft spliced in (it
        was encoded once, at its commit), any other encoded now."""
        pending = self._pending.get(q.id)
        if pending is not None and q.state == "pending":
            return pending.json(time.time())
        return wirejson.encode_models(q)

    async def questions_json(self, where: QuestionFilter, limit: int) -> tuple[list[bytes], int]:
        """Questions oldest first, as the comma-separated pieces of a JSON array's contents (to be joined once,
        inside the reply), and how many: the listing that may run to 10,000.

        The stored documents are passed on as they are, not parsed; each gets its secondsLeft appended
        at its end (a stored document never holds one). Pending ones come from memory, encoded once.
        """
        now = time.time()
        if where.state == "pending":
            chosen = self._pending.select(where, limit)
            return self._pending.json_pieces(chosen, now), len(chosen)
        rows = await self._store.question_rows(where, limit)
        docs = [f'{row.doc[:-1]},"secondsLeft":{seconds_left(row.expires, now, row.state)}}}' for row in rows]
        return [",".join(docs).encode()], len(docs)

    async def wait(self, eid: str, timeout: float, stop: asyncio.Future[Any] | None = None) -> Answer | None:
        """For remote waiters: the question's answer as stored (a credential's value [redacted]); None at the timeout
        (or once `stop` is done: the daemon is stopping).

        A question pending here is waited on without being read: its answer, once committed through this daemon,
        is taken from what the commit left in _recent (a pending question's document is parsed only when it is
        shown; every lifecycle's waiter parsed it once, about 3% of the daemon's CPU in bench/broker.py)."""
        q: Elicitation | None = None
        fut = self._futures.get(eid) if self._pending.get(eid) is not None else None
        if fut is None:
            q, fut, answer = await self._read_to_wait(eid)
            if fut is None:
                return answer
        # asyncio.wait neither starts a task nor cancels what it waits on (the asker's future is the asker's)
        await asyncio.wait((fut,) if stop is None else (fut, stop), timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        if not fut.done():
            return None
        try:
            answer = fut.result()
        except QuestionEnded as ended:
            raise Gone(f"{eid} was abandoned: {ended.reason}", state="abandoned") from None
        recent = self._recent.get(eid)
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
            raise _abandoned(eid, q)
        fut = self._futures.get(eid)
        if fut is None:
            # opened on another daemon of a shared store, and not yet heard of here: wait for its answer's
            # record like any other, after a second look in case that record came before the future
            fut = self._future_for(eid)
            q, answer = await self.get(eid)
            if q.state != "pending":
                self._futures.pop(eid, None)
                if answer is None:
                    raise _abandoned(eid, q)
                return q, None, answer
        return q, fut, None

    async def audit(self, where: AuditFilter, limit: int = 1000) -> list[AuditRecord]:
        return await self._store.audit(where, limit)

    async def last_seq(self) -> int:
        """Where the audit log stands: the seq of its latest record (0 while empty)."""
        return await self._store.last_seq()

    async def count(self, state: State) -> int:
        return len(self._pending) if state == "pending" else await self._store.count(state)

    # ---- what else is durable: a call task's record, facts learnt about servers

    async def save_task(self, task: StoredTask) -> None:
        await self._store.write(lambda tx: tx.put_task(task))

    def finish_task(self, task: StoredTask, data: dict[str, Any], behind: bool = False) -> asyncio.Future[AuditRecord]:
        """A task's final record and its task.done, committed together; the record is published after.

        `behind`: nothing durable waits on it (the call never asked, so no stored row of it says it is running,
        and no restart would re-drive it): it rides with the next commit, within BEHIND seconds."""
        row = task_row(task)  # encoded now: the row waits for its commit as four strings, not as the model
        return self._submit_record("task.done", data, session=task.session, trace=task.trace, task=task.id,
                                   with_unit=lambda tx: tx.put_task(row), within=BEHIND if behind else 0.0)

    async def task(self, tid: str) -> StoredTask | None:
        return await self._store.task(tid)

    async def tasks_in(self, states: tuple[TaskState, ...]) -> list[StoredTask]:
        return await self._store.tasks_in(states)

    async def record_consent(self, q: Elicitation, yes: bool, by: str, domain: str) -> AuditRecord:
        """A person's yes or no to opening a url-mode question's page: audited, and nothing else changes."""
        return await self._submit_record("elicit.consent", {"consent": yes, "by": by, "domain": domain},
                                         elicit=q.id, session=q.session, trace=q.trace, task=q.task)

    async def record_shown(self, q: Elicitation, where: str, how: str, by: str, pid: int | None) -> AuditRecord:
        """A client's word that the question is in front of the person (its dialog opened, a notification shown):
        audited, so whoever tells the agent what the person saw can say it truly; nothing else changes."""
        return await self._submit_record("elicit.shown", {"where": where, "how": how, "by": by}, elicit=q.id,
                                         session=q.session, trace=q.trace, task=q.task, pid=pid)

    async def fact(self, key: str) -> Any:
        return await self._store.fact(key)

    async def set_fact(self, key: str, value: Any) -> None:
        await self._store.write(lambda tx: tx.put_fact(key, value))
