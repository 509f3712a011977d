"""The broker's write steps: the units of work it queues on the store (broker/commits.py), and what each writes.

A unit runs inside the store's transaction, on the question as the store holds it, and returns an `Outcome`
for the broker to act on once it has committed; it never raises a refusal (it returns it), so what it did on
the way (an expiry) commits. Every transition writes its audit record in the same transaction. The answers
written here are remembered (`recent`) once committed, so a waiter that comes just after is served from memory.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from mcpx.broker import approvals, passkeys, policy, routing, rules
from mcpx.broker.commits import rerun
from mcpx.broker.models import (
    Action,
    Answer,
    Answerer,
    AuditKind,
    AuditRecord,
    Elicitation,
    State,
    StoredTask,
    made,
    rfc3339,
    rfc3339_epoch,
)
from mcpx.broker.refusals import AlreadyAnswered, BrokerError, Forbidden, InvalidContent, NotFound, QuestionEnded
from mcpx.broker.store import CallEnd, Identity, Store, TaskDones, TaskRow, Tx
from mcpx.shared import wirejson

log = logging.getLogger("mcpx.broker")
T = TypeVar("T")

EXPIRY = str(Answerer(kind="expiry"))  # who answers a question nobody answered in time
# questions answered through this daemon lately, kept as stored: a waiter that asks just after the answer (a
# long-poll that lost the race with it) is served from memory, not the store; an answer never changes
RECENT = 128


def _ms(epoch: float) -> datetime:
    """An audit record's time: to the millisecond, as the log has always kept it."""
    moment = rules.ts(epoch)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


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


class _Moves:
    """A unit that may end (or escalate) these questions: while one is queued or committing, none of them is
    answered from memory (Broker._deliver_first), since what the store will hold is not yet known."""

    __slots__ = ("eids", "rerun", "unit")

    def __init__(self, eids: Collection[str], unit: Callable[[Tx], Any]) -> None:
        self.eids = eids
        self.unit = unit
        self.rerun: bool = getattr(unit, "rerun", False)  # commits.rerun: as the unit it runs

    def __call__(self, tx: Tx) -> Any:
        return self.unit(tx)


class RecordUnit:
    """Writes.submit_record's unit of work and its outcome: one object while it waits for its commit, where a
    closure and its cells were a dozen that the garbage collector tracks (a stream of plain calls keeps a
    horizon's worth of these alive, and they are most of its young generation: docs/bench.md)."""

    __slots__ = ("data", "elicit", "kind", "out", "pid", "recorded", "session", "task", "trace", "with_unit",
                 "writes")

    def __init__(self, writes: Writes, kind: AuditKind, data: dict[str, Any], elicit: str | None,
                 session: str | None, trace: str | None, task: str | None, pid: int | None,
                 with_unit: Callable[[Tx], None] | None) -> None:
        self.writes, self.kind, self.data, self.pid, self.with_unit = writes, kind, data, pid, with_unit
        self.elicit, self.session, self.trace, self.task = elicit, session, trace, task
        self.out: list[AuditRecord] = []
        self.recorded: asyncio.Future[AuditRecord] = asyncio.get_running_loop().create_future()

    def __call__(self, tx: Tx) -> None:
        if self.with_unit is not None:
            self.with_unit(tx)
        self.writes.audit(tx, self.out, self.kind, time.time(), None, self.data, self.pid, elicit=self.elicit,
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


ENDS_PER_UNIT = 512  # as many as the commit queue lets wait: more start a unit of their own


class CallEnds:
    """The ends of calls nobody waits on (`Writes.end_call`: calls that never asked), written by one unit for all
    that wait for the same commit: each its row and its task.done, as a RecordUnit writes them, without a unit, a
    savepoint and two futures of its own (a stream of plain calls ends hundreds within a horizon). `committed`
    resolves, to how many it wrote, once they committed. `heard`: whether a task.done published now would reach
    anyone (the event bus's); their `AuditRecord`s are made only if so (store.TaskDones)."""

    __slots__ = ("_ends", "_lock", "committed", "heard", "weight", "writes")

    def __init__(self, writes: Writes, heard: Callable[[str], bool] | None) -> None:
        self.writes = writes
        self.heard = heard
        # the unit takes its ends where its batch commits (the store's thread, for a batch nobody waits on) while the
        # loop may be adding one (`Writes.end_call`): an end added once the unit took them goes to the next unit
        self._lock = threading.Lock()
        self._ends: list[CallEnd] | None = []
        self.committed: asyncio.Future[int] | None = None
        self.weight = 0  # how many it wrote: what the store counts towards its next checkpoint

    def add(self, end: CallEnd) -> bool:
        """Whether this unit writes `end`: not once it began writing, nor once it holds ENDS_PER_UNIT."""
        with self._lock:
            if self._ends is None or len(self._ends) >= ENDS_PER_UNIT:
                return False
            self._ends.append(end)
            return True

    def __call__(self, tx: Tx) -> int:
        with self._lock:
            ends, self._ends = self._ends or [], None
        self.weight = len(ends)
        # one moment for them all, the commit's: each row's update, each task.done's time (to the millisecond, as
        # `Writes.audit` keeps it), made and written once
        now = time.time()
        when, pid = rfc3339_epoch(now), self.writes.pid
        rows: list[TaskRow] = []
        docs: list[str] = []
        for row, data, session, trace, tid in ends:
            rows.append(row())
            docs.append(done_doc(when, data, session, trace, tid, pid))
        # every row in one statement, every record in one more (each numbered as the log holds it, in order)
        tx.put_tasks(rows, now)
        tx.audit_dones(TaskDones(_ms(now), pid, ends, docs, self.heard))
        return len(ends)


def done_doc(when: str, data: dict[str, Any], session: str, trace: str | None, tid: str, pid: int) -> str:
    """A call's task.done's document at `when` (as rfc3339 writes it): `AuditRecord.of`'s, byte for byte (the
    record's fields in its order, by alias, without nulls), without the record (store.TaskDones makes it if anyone
    is to hear of it)."""
    doc = {"at": when, "kind": "task.done", "session": session, "trace": trace, "task": tid, "pid": pid, "data": data}
    if trace is None:
        del doc["trace"]
    return wirejson.encode_models(doc).decode()


def _retrieved(f: asyncio.Future[Any]) -> None:
    if not f.cancelled():
        f.exception()


class Writes:
    """The broker's writes on `store`, as daemon `pid` (`me`: this daemon as a team sharing the store knows it)."""

    def __init__(self, store: Store, pid: int, me: Identity | None) -> None:
        self._store = store
        self.pid = pid
        self._me = me
        self._answered: dict[str, tuple[Elicitation, Answer]] = {}  # written by a unit, to recent once committed
        self.recent: dict[str, tuple[Elicitation, Answer]] = {}  # oldest first, at most RECENT
        self._ends: CallEnds | None = None  # the ends of calls that wait for the next commit, if any yet

    # ---- the queue

    def write(self, eids: Collection[str], unit: Callable[[Tx], T], within: float = 0.0) -> asyncio.Future[T]:
        """Queue a unit that may end or escalate the questions `eids`."""
        return self._store.submit(_Moves(eids, unit), within)

    def move_queued(self, eid: str) -> bool:
        """Whether a unit that may end or escalate `eid` was queued and has not yet committed."""
        return self._store.holds(lambda u: isinstance(u, _Moves) and eid in u.eids)

    def submit_record(self, kind: AuditKind, data: dict[str, Any], *, elicit: str | None = None,
                      session: str | None = None, trace: str | None = None, task: str | None = None,
                      pid: int | None = None, with_unit: Callable[[Tx], None] | None = None,
                      within: float = 0.0, waited: bool = True) -> asyncio.Future[AuditRecord]:
        """A transition that is not a question's own (elicit.resumed, task.done), queued now.

        `with_unit` writes in the same transaction (a task's final state beside its task.done); `within`: the
        record may wait that long for company (broker/commits.py); `waited` False: it commits at once, but no reply
        waits on it, so it may commit off the loop. The record is published once committed; await the future to
        know when that is.
        """
        unit = RecordUnit(self, kind, data, elicit, session, trace, task, pid, with_unit)
        self._store.submit(unit, within, waited).add_done_callback(unit.published)
        unit.recorded.add_done_callback(_retrieved)
        return unit.recorded

    def end_call(self, row: Callable[[], TaskRow], data: dict[str, Any], *, tid: str, session: str,
                 trace: str | None, within: float, heard: Callable[[str], bool] | None = None) -> asyncio.Future[int]:
        """A call's end that nobody waits on: its final row (`row`, built where it is written) and its task.done,
        written with the other such ends that wait for the same commit by one unit (`CallEnds`), which may wait
        `within` seconds for company. The future resolves once they committed (the same future for all of them).
        `heard`: whether a task.done published now would reach anyone (CallEnds)."""
        end: CallEnd = (row, data, session, trace, tid)
        ends = self._ends
        if ends is None or not ends.add(end):
            ends = CallEnds(self, heard)
            ends.add(end)
            ends.committed = self._store.submit(ends, within)
            self._ends = ends  # once queued: a store that refused it leaves no unit for the next end to join
        assert ends.committed is not None
        return ends.committed

    # ---- what answered questions leave behind

    def remember(self, eid: str) -> None:
        """A question this daemon's unit answered has committed: into `recent`, in the same loop turn as it leaves
        the pending index, so a read in between finds it there."""
        answered = self._answered.pop(eid, None)
        if answered is not None:
            self.recent[eid] = answered
            if len(self.recent) > RECENT:
                del self.recent[next(iter(self.recent))]

    def forget(self, eid: str) -> None:
        """An answer's unit is done: it went to `recent` as it committed, or it failed and never will."""
        self._answered.pop(eid, None)

    # ---- the steps units are made of

    def audit(self, tx: Tx, out: list[AuditRecord], kind: AuditKind, at: float, q: Elicitation | None,
              data: dict[str, Any], pid: int | None = None, *, exact_pid: bool = False,
              elicit: str | None = None, session: str | None = None, trace: str | None = None,
              task: str | None = None) -> None:
        """`pid` None is mcpx's own doing (the daemon's pid), unless `exact_pid`: then nobody's known pid."""
        if q is not None:
            elicit, session, trace, task = q.id, q.session, q.trace, q.task
        record, doc = AuditRecord.of(_ms(at), rfc3339_epoch(at), {
            "kind": kind, "elicit": elicit, "session": session, "trace": trace, "task": task,
            "pid": pid if pid is not None or exact_pid else self.pid, "data": data})
        tx.audit_encoded(((record, doc),))
        out.append(record)  # as the log holds it: numbered with its seq

    def answer_of(self, q: Elicitation, action: Action, content: dict[str, Any] | None, by: str,
                  session: str | None, pid: int | None, reason: str | None, now: float) -> Answer:
        # made, not validated: the content was checked against the question's form, the rest is the daemon's own
        return made(Answer, {
            "id": q.id, "action": action, "content": content, "by": by, "at": rules.ts(now), "session": session,
            "pid": pid, "user": self._me.user if self._me else None, "host": self._me.host if self._me else None,
            "answered_after_ms": max(0, int((now - q.created.timestamp()) * 1000)), "reason": reason})

    def commit_answer(self, tx: Tx, records: list[AuditRecord], q: Elicitation, action: Action,
                      content: dict[str, Any] | None, by: str, session: str | None, pid: int | None,
                      reason: str | None, now: float, secret: Collection[str],
                      state: State = "answered") -> tuple[Answer, Elicitation]:
        answer = self.answer_of(q, action, content, by, session, pid, reason, now)
        return answer, self.write_answer(tx, records, q, answer, secret, state)

    def write_answer(self, tx: Tx, records: list[AuditRecord], q: Elicitation, answer: Answer,
                     secret: Collection[str], state: State = "answered") -> Elicitation:
        """`answer` to pending `q`, written: the question as it now stands."""
        stored = rules.as_stored(answer, secret)
        q = q.in_state(state)
        if not tx.update_question(q):
            raise AlreadyAnswered(f"{q.id} was answered a moment ago")  # unreachable: units never interleave
        tx.insert_answer(stored)
        kind: AuditKind = "elicit.expired" if state == "expired" else "elicit.answered"
        data = {"action": answer.action, "by": answer.by, "answeredAfterMs": stored.answered_after_ms}
        if answer.approvers is not None:
            data["approvers"] = answer.approvers
        if answer.passkeys is not None:
            data["passkeys"] = answer.passkeys  # verified by passkey: `mcpx audit` says so
        if self._me is not None:
            data.update(user=self._me.user, host=self._me.host)
        if stored.content is not None:
            data["content"] = stored.content
        if answer.reason:
            data["reason"] = answer.reason
        self.audit(tx, records, kind, answer.at.timestamp(), q, data, answer.pid, exact_pid=True)  # who answered
        return q

    def write_answered(self, tx: Tx, records: list[AuditRecord], q: Elicitation, answer: Answer) -> Elicitation:
        """Someone's answer to pending `q`, written, its stored copy left for `recent` (taken there as it commits)."""
        answered = self.write_answer(tx, records, q, answer, q.secret_fields)
        self._answered[q.id] = (answered, rules.as_stored(answer, q.secret_fields))
        return answered

    def expire_in(self, tx: Tx, records: list[AuditRecord], q: Elicitation, now: float) -> Answer:
        answer, _ = self.commit_answer(
            tx, records, q, "cancel", None, EXPIRY, None, self.pid,
            f"nobody answered by {rfc3339(q.expires_at)}", now, set(), state="expired")
        return answer

    def abandon_in(self, tx: Tx, records: list[AuditRecord], q: Elicitation, reason: str, now: float) -> Elicitation:
        q = q.model_copy(update={"state": "abandoned", "state_reason": reason})
        tx.update_question(q)
        self.audit(tx, records, "elicit.abandoned", now, q, {"reason": reason})
        return q

    def escalate_in(self, tx: Tx, records: list[AuditRecord], q: Elicitation, by: str, reason: str | None,
                    now: float, pid: int | None) -> Elicitation:
        q, why = rules.escalated(q, reason)
        tx.update_question(q)
        self.audit(tx, records, "elicit.escalated", now, q,
                   {"by": by, "reason": why, "from": "agent-then-human", "to": "human"}, pid, exact_pid=True)
        return q

    def pending_in(self, tx: Tx, records: list[AuditRecord], eid: str, now: float,
                   known: Elicitation | None = None) -> Elicitation | Outcome:
        """`eid` as the store holds it (`known`: as the broker knows the store holds it, not read again), if an answer
        may still reach it; else the answer's refusal (no such question, ended, or out of time: then expired on the
        way)."""
        q = known if known is not None else tx.question(eid)
        if q is None:
            return Outcome(None, refusal=NotFound(f"no question {eid}"))
        if q.state == "pending" and now >= q.expires_at.timestamp():
            expired = self.expire_in(tx, records, q, now)
            return Outcome(q, expired=expired,
                           refusal=rules.ended_error(q.model_copy(update={"state": "expired"}), None))
        if q.state != "pending":
            return Outcome(q, refusal=rules.ended_error(q, tx.answer(q.id)))
        return q

    # ---- the units

    def opening(self, q: Elicitation, decided: routing.Route, decision: policy.Decision | None,
                stored_task: StoredTask | None, pid: int | None, now: float) -> Callable[[Tx], Outcome]:
        """The unit that opens `q` (and stores its call's task beside it), settled at once if the policy decided."""

        def unit(tx: Tx) -> Outcome:
            records: list[AuditRecord] = []
            tx.insert_question(q)
            if stored_task is not None:
                tx.put_task(stored_task)
            data: dict[str, Any] = {"server": q.server, "tool": q.tool, "mode": q.mode, "audience": q.audience,
                                    "reason": q.reason, "expiresAt": rfc3339(q.expires_at)}
            if q.approvals is not None:
                data["approvals"] = {"need": q.approvals.need, "waiting": q.approvals.waiting}
                if q.approvals.next_at is not None:
                    data["approvalsDue"] = rfc3339(q.approvals.next_at)
                if self._me is not None:
                    data["daemon"] = self._me.id  # which daemon of a team notifies the approvers
            if decided.hint_ignored:
                data["hintIgnored"] = decided.hint_ignored
            if q.ambiguous:
                data["ambiguous"] = True
            self.audit(tx, records, "elicit.open", now, q, data, pid)
            if decision is None:
                return Outcome(q)
            self.audit(tx, records, "policy.fired", now, q,
                       {"rule": decision.source, "action": decision.action or "error", "because": decision.because})
            if decision.fail:
                ended_q = self.abandon_in(tx, records, q, decision.because, now)
                return Outcome(ended_q, ended=QuestionEnded(q.id, "abandoned", decision.because))
            assert decision.action is not None
            content = decision.content
            if content is not None:
                content, _ = q.form.check_content(content)
            answer, answered_q = self.commit_answer(tx, records, q, decision.action, content, decision.by, None,
                                                    self.pid, decision.because, now, q.secret_fields)
            return Outcome(answered_q, answer)

        return rerun(unit)  # what it makes is made anew each run; the question keeps the same document

    def answering(self, eid: str, action: Action, content: dict[str, Any] | None, by: str, session: str | None,
                  pid: int | None, reason: str | None, now: float,
                  asked_here: Callable[[str], bool], proof: passkeys.Proof | None = None,
                  may_sign: Callable[[str], Forbidden | None] = lambda person: None,
                  known: Elicitation | None = None) -> Callable[[Tx], Outcome]:
        """The unit that answers `eid` as the store holds it: expired on the way if its time ran out, refused by
        the answer rules, escalated by an agent's decline, or answered. `proof`: a passkey's assertion of the
        accept, for a question that needs presence; it answers as the passkey's person. `known`: the question as
        the store holds it, and will when the unit runs (nothing queued before it may move it), so not read again."""

        def unit(tx: Tx) -> Outcome:
            records: list[AuditRecord] = []
            q = self.pending_in(tx, records, eid, now, known)
            if isinstance(q, Outcome):
                return q
            refusal = (rules.refusal(q, by, session, action) or rules.approvers_only(q, action)
                       or rules.unproven(q, action, proof is not None)
                       or rules.elsewhere(q, action, self._me is not None, asked_here(q.id)))
            if refusal is not None:
                return Outcome(q, refusal=refusal)
            if rules.escalates(q, action, by):
                return Outcome(self.escalate_in(tx, records, q, by, reason, now, pid))
            try:
                clean = rules.checked_content(q, action, content)
            except InvalidContent as exc:
                return Outcome(q, refusal=exc)
            who, signed = by, None
            if proof is not None and q.presence and action == "accept":
                try:
                    key = passkeys.prove(tx, proof, q, clean, now, may_sign)
                except Forbidden as exc:
                    return Outcome(q, refusal=exc)
                who, signed = str(Answerer(kind="person", detail=key.person)), [key.id]
            answer = self.answer_of(q, action, clean, who, session, pid, reason, now)
            if signed is not None:
                answer = answer.model_copy(update={"passkeys": signed})
            return Outcome(self.write_answered(tx, records, q, answer), answer)

        return rerun(unit)  # read anew, made anew; `_answered` set again to what the last run made

    def approving(self, eid: str, person: str | None, action: Action, reason: str | None,
                  now: float, proof: passkeys.Proof | None = None) -> Callable[[Tx], Outcome]:
        """The unit that counts `person`'s answer through their own link (broker/approvals.py): refused, counted,
        or deciding the question; each one an elicit.approval record naming the person. With presence, an accept
        counts only with the approver's own passkey (`proof`), which names the person (`person` None: a page
        that is no one's link, the inbox signed in)."""

        def unit(tx: Tx) -> Outcome:
            records: list[AuditRecord] = []
            q = self.pending_in(tx, records, eid, now)
            if isinstance(q, Outcome):
                return q
            if q.approvals is None:
                return Outcome(q, refusal=Forbidden(f"{eid} needs no approvals: this link is not for it"))
            voter, key = person, None
            if q.presence and action == "accept":
                if proof is None:
                    return Outcome(q, refusal=rules.unproven(q, action, False))
                try:
                    key = passkeys.prove(tx, proof, q, approvals.content_of(q), now, lambda p: None)
                except Forbidden as exc:
                    return Outcome(q, refusal=exc)
                if person is not None and key.person != person:
                    return Outcome(q, refusal=Forbidden(f"this is {person}'s link, and the passkey is "
                                                        f"{key.person}'s: each approver signs with their own"))
                voter = key.person
            if voter is None:
                return Outcome(q, refusal=Forbidden(f"{eid} is approved only through each approver's own link"))
            vote = approvals.vote(q, q.approvals, voter, action)
            data: dict[str, Any] = {"person": voter, "action": action}
            if key is not None:
                data["passkey"] = key.id
                if vote.refusal is None:
                    vote = approvals.Vote(vote.approvals.model_copy(update={
                        "passkeys": {**vote.approvals.passkeys, voter: key.id}}), vote.final)
            if vote.refusal is not None:
                if vote.recorded:
                    q = q.model_copy(update={"approvals": vote.approvals})
                    tx.update_question(q)
                    self.audit(tx, records, "elicit.approval", now, q, {**data, "refused": str(vote.refusal)})
                return Outcome(q, refusal=vote.refusal)
            q = q.model_copy(update={"approvals": vote.approvals})
            self.audit(tx, records, "elicit.approval", now, q,
                       {**data, "counted": True, "approved": vote.approvals.by, "need": vote.approvals.need})
            if vote.final is None:
                tx.update_question(q)
                return Outcome(q)
            content = approvals.content_of(q) if vote.final == "accept" else None
            who = vote.approvals.by if vote.final == "accept" else [voter]
            answer = self.answer_of(q, vote.final, content, str(Answerer(kind="person", detail=",".join(who))),
                                    None, None, reason, now).model_copy(update={"approvers": who})
            if q.presence and vote.final == "accept":
                answer = answer.model_copy(update={"passkeys": [vote.approvals.passkeys[p] for p in who]})
            return Outcome(self.write_answered(tx, records, q, answer), answer)

        return unit

    def nudging(self, due: list[str], now: float) -> Callable[[Tx], list[tuple[str, float | None]]]:
        """The unit that sends the reminders and escalations due among `due` (elicit.reminded, which the notifier
        follows): each question's next due time as now stored. One daemon of a team writes each: the others find
        the stored next time moved on."""

        def unit(tx: Tx) -> list[tuple[str, float | None]]:
            records: list[AuditRecord] = []
            out: list[tuple[str, float | None]] = []
            for eid in due:
                q = tx.question(eid)
                if q is None or q.state != "pending" or q.approvals is None:
                    continue
                step = approvals.nudge(q.approvals, now)
                if step is not None:
                    q = q.model_copy(update={"approvals": step.approvals})
                    tx.update_question(q)
                    data = step.data()
                    if self._me is not None:
                        data["daemon"] = self._me.id
                    self.audit(tx, records, "elicit.reminded", now, q, data)
                out.append((eid, approvals.due_at(q.approvals)))
            return out

        return unit

    def expiring(self, due: list[str], now: float) -> Callable[[Tx], list[tuple[str, Answer]]]:
        """The unit that expires those of `due` still pending: each with its expiry's answer."""

        def unit(tx: Tx) -> list[tuple[str, Answer]]:
            records: list[AuditRecord] = []
            out = []
            for eid in due:
                q = tx.question(eid)
                if q is not None and q.state == "pending":
                    out.append((eid, self.expire_in(tx, records, q, now)))
            return out

        return unit

    def abandoning(self, eid: str, reason: str, now: float) -> Callable[[Tx], bool]:
        """The unit that abandons `eid` if it is still pending: whether it did."""

        def unit(tx: Tx) -> bool:
            q = tx.question(eid)
            if q is None or q.state != "pending":
                return False
            self.abandon_in(tx, [], q, reason, now)
            return True

        return unit

    def taking_over(self, task: StoredTask, owner: str, reason: str, pending: list[str],
                    now: float) -> Callable[[Tx], list[str] | None]:
        """The unit that ends a lapsed daemon's call, if this daemon claims it first: its `pending` questions
        abandoned, the task failed with its task.done; the questions it abandoned, or None (claimed already)."""
        ended = task.model_copy(update={"state": "failed", "error": reason, "open": [], "resume": None,
                                        "updated": rules.ts(now)})

        def unit(tx: Tx) -> list[str] | None:
            if not tx.claim_task(task.id, owner):
                return None
            records: list[AuditRecord] = []
            gone = []
            for eid in pending:
                q = tx.question(eid)
                if q is not None and q.state == "pending":
                    self.abandon_in(tx, records, q, reason, now)
                    gone.append(eid)
            tx.put_task(ended)
            self.audit(tx, records, "task.done", now, None,
                       {"state": "failed", "server": task.server, "tool": task.tool, "error": reason},
                       session=task.session, trace=task.trace, task=task.id)
            return gone

        return unit
