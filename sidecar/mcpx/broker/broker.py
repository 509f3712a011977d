"""The broker: open a question, answer it once, wait for it, expire it, abandon it.

It knows nothing of MCP or HTTP. An asker in this process holds a `Handle` and is woken
the moment an answer commits (no polling); everyone else reads the store or the event bus.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from mcpx import wirejson
from mcpx.broker import policy, routing
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
from mcpx.broker.events import EventBus
from mcpx.broker.models import (
    REDACTED,
    Action,
    Answer,
    AuditKind,
    AuditRecord,
    Elicitation,
    OpenRequest,
    rfc3339,
)
from mcpx.broker.schema import SchemaProblem, check_schema, validate_content
from mcpx.broker.store import Store, Tx
from mcpx.config import Config
from mcpx.ids import is_id, new_id

log = logging.getLogger("mcpx.broker")


class InvalidQuestion(BrokerError):
    code, status = "invalid_question", 400


class Settings(Protocol):
    """Where the broker reads the config in force (a ConfigSource): TTLs and the policy, at each question."""

    @property
    def config(self) -> Config: ...


def _ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def redact(content: dict[str, Any] | None, secret: set[str]) -> dict[str, Any] | None:
    if content is None or not secret:
        return content
    return {k: (REDACTED if k in secret else v) for k, v in content.items()}


class Handle:
    """An in-process asker's hold on its question: the answer arrives here, secrets included."""

    def __init__(self, elicitation: Elicitation, future: asyncio.Future[Answer]) -> None:
        self.elicitation = elicitation
        self._future = future

    @property
    def id(self) -> str:
        return self.elicitation.id

    def done(self) -> bool:
        return self._future.done()

    async def answer(self) -> Answer:
        """The answer (expiry answers cancel); raises QuestionEnded when the question was abandoned."""
        return await asyncio.shield(self._future)


class Broker:
    def __init__(self, store: Store, settings: Settings, pid: int | None = None) -> None:
        self.store = store
        self.bus = EventBus()
        self._settings = settings
        self.pid = pid or os.getpid()
        self._futures: dict[str, asyncio.Future[Answer]] = {}
        self._deadlines: list[tuple[float, str]] = []
        self._wake = asyncio.Event()
        self._sweeper: asyncio.Task[None] | None = None

    # ---- lifecycle

    async def start(self) -> None:
        for expires, eid in await self.store.pending_deadlines():
            self._future_for(eid)
            heapq.heappush(self._deadlines, (expires, eid))
        self._sweeper = asyncio.create_task(self._sweep(), name="mcpx-sweeper")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            try:
                await self._sweeper
            except asyncio.CancelledError:
                pass
            self._sweeper = None

    def _future_for(self, eid: str) -> asyncio.Future[Answer]:
        fut = self._futures.get(eid)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            # an abandoned question nobody awaits must not log "exception never retrieved"
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._futures[eid] = fut
        return fut

    def handle(self, eid: str, elicitation: Elicitation) -> Handle | None:
        """Re-attach to a pending question after a restart (modern-era calls re-driven)."""
        fut = self._futures.get(eid)
        return Handle(elicitation, fut) if fut is not None else None

    # ---- records

    def _record_doc(self, kind: AuditKind, at: float, q: Elicitation | None, data: dict[str, Any],
                    pid: int | None, **fields: Any) -> dict[str, Any]:
        doc: dict[str, Any] = {"at": rfc3339(_ts(at)), "kind": kind, "pid": pid, "data": data}
        if q is not None:
            doc.update(elicit=q.id, session=q.session, trace=q.trace, task=q.task)
        doc.update({k: v for k, v in fields.items() if v is not None})
        return {k: v for k, v in doc.items() if v is not None}

    def _audit(self, tx: Tx, out: list[AuditRecord], kind: AuditKind, at: float, q: Elicitation | None,
               data: dict[str, Any], pid: int | None = None, *, exact_pid: bool = False, **fields: Any) -> None:
        """`pid` None is mcpx's own doing (the daemon's pid), unless `exact_pid`: then nobody's known pid."""
        doc = self._record_doc(kind, at, q, data, pid if pid is not None or exact_pid else self.pid, **fields)
        seq = tx.audit(at, kind, doc)
        out.append(AuditRecord.model_validate({**doc, "seq": seq}))

    def _publish(self, records: list[AuditRecord]) -> None:
        for record in records:
            self.bus.publish(record)

    def submit_record(self, kind: AuditKind, data: dict[str, Any], *, elicit: str | None = None,
                      session: str | None = None, trace: str | None = None, task: str | None = None,
                      pid: int | None = None, with_unit: Callable[[Tx], None] | None = None,
                      ) -> "asyncio.Future[AuditRecord]":
        """A transition that is not a question's own (elicit.resumed, task.done), queued now.

        `with_unit` writes in the same transaction (a task's final state beside its task.done).
        The record is published once committed; await the future to know when that is.
        """
        out: list[AuditRecord] = []

        def unit(tx: Tx) -> None:
            if with_unit is not None:
                with_unit(tx)
            self._audit(tx, out, kind, time.time(), None, data, pid, elicit=elicit, session=session, trace=trace,
                        task=task)

        committed = self.store.submit(unit)
        recorded: asyncio.Future[AuditRecord] = asyncio.get_running_loop().create_future()

        def published(f: "asyncio.Future[None]") -> None:
            if f.cancelled() or f.exception() is not None:
                log.error("recording %s failed: %s", kind, f.exception() if not f.cancelled() else "cancelled")
                if not recorded.done():
                    recorded.set_exception(f.exception() or RuntimeError("cancelled"))
                return
            self._publish(out)
            if not recorded.done():
                recorded.set_result(out[0])

        committed.add_done_callback(published)
        recorded.add_done_callback(lambda f: f.cancelled() or f.exception())
        return recorded

    async def record(self, kind: AuditKind, data: dict[str, Any], **fields: Any) -> AuditRecord:
        return await self.submit_record(kind, data, **fields)

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
        decided = routing.route(req.mode, schema, req.message, req.meta, req.audience)
        q = Elicitation(
            id=new_id("elc"), trace=req.trace, parent=req.parent, task=req.task, session=req.session,
            session_source=req.session_source, server=req.server, tool=req.tool, mode=req.mode,
            message=req.message, requested_schema=schema, url=req.url, upstream_id=req.upstream_id,
            audience=decided.audience, reason=decided.reason, created=_ts(now), expires_at=_ts(now + ttl),
            seconds_left=max(0, int(ttl + 0.999)), state="pending", ambiguous=req.ambiguous,
            secret_fields=sorted(routing.secret_fields(schema)),
        )
        return q, decided

    @staticmethod
    def _doc(q: Elicitation) -> dict[str, Any]:
        doc = q.wire()
        doc.pop("secondsLeft", None)
        return doc

    async def open(self, req: OpenRequest) -> Handle:
        now = time.time()
        q, decided = self._build(req, now)
        decision, _checks = policy.evaluate(self._settings.config.elicit, q, mode=req.policy_mode)
        records: list[AuditRecord] = []
        expires = now + (q.expires_at - q.created).total_seconds()

        def unit(tx: Tx) -> tuple[Elicitation, Answer | None, QuestionEnded | None]:
            tx.insert_elicitation(
                {"id": q.id, "session": q.session, "server": q.server, "audience": q.audience, "state": "pending",
                 "created": now, "expires": expires, "trace": q.trace, "task": q.task},
                self._doc(q),
            )
            data: dict[str, Any] = {"server": q.server, "tool": q.tool, "mode": q.mode, "audience": q.audience,
                                    "reason": q.reason, "expiresAt": rfc3339(q.expires_at)}
            if decided.hint_ignored:
                data["hintIgnored"] = decided.hint_ignored
            if q.ambiguous:
                data["ambiguous"] = True
            self._audit(tx, records, "elicit.open", now, q, data, req.pid)
            if decision is None:
                return q, None, None
            self._audit(tx, records, "policy.fired", now, q,
                        {"rule": decision.source, "action": decision.action or "error", "because": decision.because})
            if decision.fail:
                ended_q = q.model_copy(update={"state": "abandoned", "state_reason": decision.because,
                                               "seconds_left": 0})
                tx.update_elicitation(q.id, "abandoned", q.audience, self._doc(ended_q))
                self._audit(tx, records, "elicit.abandoned", now, ended_q, {"reason": decision.because})
                return ended_q, None, QuestionEnded(q.id, "abandoned", decision.because)
            assert decision.action is not None
            content = decision.content
            if content is not None:
                content, _ = validate_content(q.requested_schema, content)
            answer, answered_q = self._commit_answer(tx, records, q, decision.action, content, decision.by, None,
                                                     self.pid, decision.because, now,
                                                     routing.secret_fields(q.requested_schema))
            return answered_q, answer, None

        q, answer, ended = await self.store.write(unit)
        fut = self._future_for(q.id)
        if answer is not None:
            self._wake_asker(q.id, answer)
        elif ended is not None:
            self._futures.pop(q.id, None)
            fut.set_exception(ended)
        else:
            heapq.heappush(self._deadlines, (expires, q.id))
            if self._deadlines[0][1] == q.id:
                self._wake.set()
        self._publish(records)
        # one loop turn for the subscribers woken above: the news of a question goes out before
        # the reply to whoever opened it (both are in flight; this only orders them)
        await asyncio.sleep(0)
        return Handle(q, fut)

    # ---- answer

    def _commit_answer(self, tx: Tx, records: list[AuditRecord], q: Elicitation, action: Action,
                             content: dict[str, Any] | None, by: str, session: str | None, pid: int | None,
                             reason: str | None, now: float, secret: set[str],
                             state: str = "answered") -> tuple[Answer, Elicitation]:
        answer = Answer(
            id=q.id, action=action, content=content, by=by, at=_ts(now), session=session, pid=pid,
            answered_after_ms=max(0, int((now - q.created.timestamp()) * 1000)), reason=reason,
        )
        stored = answer.model_copy(update={"content": redact(content, secret)})
        q = q.model_copy(update={"state": state, "seconds_left": 0})
        if not tx.update_elicitation(q.id, state, q.audience, self._doc(q)):
            raise AlreadyAnswered(f"{q.id} was answered a moment ago")  # unreachable: units never interleave
        tx.insert_answer(q.id, stored.wire())
        kind: AuditKind = "elicit.expired" if state == "expired" else "elicit.answered"
        data = {"action": action, "by": by, "answeredAfterMs": stored.answered_after_ms}
        if stored.content is not None:
            data["content"] = stored.content
        if reason:
            data["reason"] = reason
        self._audit(tx, records, kind, now, q, data, pid, exact_pid=True)  # who answered, if known
        return answer, q

    @staticmethod
    def _load(doc: dict[str, Any], expires: float, now: float) -> Elicitation:
        left = max(0, int(expires - now + 0.999)) if doc.get("state") == "pending" else 0
        return Elicitation.model_validate({**doc, "secondsLeft": left})

    async def answer(self, eid: str, action: Action, content: dict[str, Any] | None = None, *, by: str,
                     session: str | None = None, pid: int | None = None, reason: str | None = None,
                     ) -> tuple[Elicitation, Answer | None]:
        """Answer a question. Returns (question, answer); answer is None when an agent's decline escalated it."""
        if not is_id(eid, "elc"):
            raise InvalidId(f"{eid!r} is not a question id (they look like elc- and 16 hex digits)")
        if (where := wirejson.lone_surrogate({"content": content, "reason": reason})) is not None:
            raise InvalidContent(f"the answer does not fit the question: {where} {wirejson.SURROGATE_PROBLEM}",
                                 {where: wirejson.SURROGATE_PROBLEM})
        records: list[AuditRecord] = []
        now = time.time()

        def unit(tx: Tx) -> tuple[Elicitation, Answer | None, Answer | None, BrokerError | None]:
            """(question, answer, expiry answer, refusal) — a refusal is returned, not raised, so expiry commits."""
            row = tx.elicitation(eid)
            if row is None:
                return None, None, None, NotFound(f"no question {eid}")  # type: ignore[return-value]
            q = self._load(row[0], row[1], now)
            if q.state == "pending" and now >= row[1]:
                expired = self._expire_in(tx, records, q, now)
                return q, None, expired, self._ended_error_of(q.model_copy(update={"state": "expired"}), None)
            if q.state != "pending":
                return q, None, None, self._ended_error_of(q, tx.answer(q.id))
            refusal = self._refusal(q, action, by, session)
            if refusal is not None:
                return q, None, None, refusal
            if by.startswith("agent:") and action == "decline" and q.audience == "agent-then-human":
                return self._escalate_in(tx, records, q, by, reason, now, pid), None, None, None
            try:
                clean = self._checked_content(q, action, content)
            except InvalidContent as exc:
                return q, None, None, exc
            answer, q = self._commit_answer(tx, records, q, action, clean, by, session, pid, reason, now,
                                            routing.secret_fields(q.requested_schema))
            return q, answer, None, None

        q, answer, expired, refusal = await self.store.write(unit)
        for reached in (expired, answer):
            if reached is not None:
                self._wake_asker(eid, reached)
        self._publish(records)
        if refusal is not None:
            raise refusal
        return q, answer

    @staticmethod
    def _ended_error_of(q: Elicitation, prior: dict[str, Any] | None) -> BrokerError:
        if q.state == "answered":
            prior = prior or {}
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

    def _escalate_in(self, tx: Tx, records: list[AuditRecord], q: Elicitation, by: str, reason: str | None,
                     now: float, pid: int | None) -> Elicitation:
        why = reason or "the agent gave no reason"
        q = q.model_copy(update={
            "audience": "human", "escalated": True,
            "state_reason": f"the agent declined: {why}",
            "reason": f"the agent declined ({why}), so the person is asked",
        })
        tx.update_elicitation(q.id, "pending", "human", self._doc(q))
        self._audit(tx, records, "elicit.escalated", now, q,
                    {"by": by, "reason": why, "from": "agent-then-human", "to": "human"}, pid, exact_pid=True)
        return q

    def _wake_asker(self, eid: str, answer: Answer) -> None:
        """Wake the in-process asker — only ever after the answer has committed."""
        fut = self._futures.pop(eid, None)
        if fut is not None and not fut.done():
            fut.set_result(answer)

    # ---- expiry and abandonment

    def _expire_in(self, tx: Tx, records: list[AuditRecord], q: Elicitation, now: float) -> Answer:
        answer, _ = self._commit_answer(
            tx, records, q, "cancel", None, "expiry", None, self.pid,
            f"nobody answered by {rfc3339(q.expires_at)}", now, set(), state="expired")
        return answer

    async def expire_due(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        due: list[str] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            due.append(heapq.heappop(self._deadlines)[1])
        if not due:
            return 0
        records: list[AuditRecord] = []

        def unit(tx: Tx) -> list[tuple[str, Answer]]:
            out = []
            for eid in due:
                row = tx.elicitation(eid)
                if row is not None and row[0].get("state") == "pending":
                    out.append((eid, self._expire_in(tx, records, self._load(row[0], row[1], now), now)))
            return out

        expired = await self.store.write(unit)
        for eid, answer in expired:
            self._wake_asker(eid, answer)
        self._publish(records)
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
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, min(delay, 3600.0)))
            except TimeoutError:
                pass

    async def abandon(self, eid: str, reason: str) -> bool:
        """The asker went away; the question ends without an answer. False if it had already ended."""
        records: list[AuditRecord] = []
        now = time.time()

        def unit(tx: Tx) -> bool:
            row = tx.elicitation(eid)
            if row is None or row[0].get("state") != "pending":
                return False
            q = self._load(row[0], row[1], now).model_copy(update={"state": "abandoned", "state_reason": reason,
                                                                   "seconds_left": 0})
            tx.update_elicitation(eid, "abandoned", q.audience, self._doc(q))
            self._audit(tx, records, "elicit.abandoned", now, q, {"reason": reason})
            return True

        if not await self.store.write(unit):
            return False
        fut = self._futures.pop(eid, None)
        if fut is not None and not fut.done():
            fut.set_exception(QuestionEnded(eid, "abandoned", reason))
        self._publish(records)
        return True

    def mark_resumed(self, q: Elicitation, data: dict[str, Any]) -> "asyncio.Future[AuditRecord]":
        """Recorded behind the answer's delivery: the asker is not kept waiting for the audit."""
        return self.submit_record("elicit.resumed", data, elicit=q.id, session=q.session, trace=q.trace, task=q.task)

    # ---- reads

    async def get(self, eid: str) -> tuple[Elicitation, Answer | None]:
        if not is_id(eid, "elc"):
            raise InvalidId(f"{eid!r} is not a question id (they look like elc- and 16 hex digits)")
        row = await self.store.elicitation_and_answer(eid)
        if row is None:
            raise NotFound(f"no question {eid}")
        doc, expires, stored = row
        return self._load(doc, expires, time.time()), (Answer.model_validate(stored) if stored else None)

    async def questions(self, **filters: str | None) -> list[Elicitation]:
        limit = int(filters.pop("limit", None) or 10000)
        now = time.time()
        return [self._load(doc, exp, now) for doc, exp in await self.store.list_docs(filters, limit)]

    async def list_json(self, filters: dict[str, str | None], limit: int) -> tuple[str, int]:
        return await self.store.list_json(filters, limit, time.time())

    async def wait(self, eid: str, timeout: float) -> tuple[Elicitation, Answer | None]:
        """For remote waiters: the question and its stored (redacted) answer, the answer None at the timeout."""
        q, answer = await self.get(eid)
        if answer is not None:
            return q, answer
        if q.state == "abandoned":
            raise Gone(f"{eid} was abandoned: {q.state_reason or 'its asker went away'}", state="abandoned")
        fut = self._futures.get(eid)
        if fut is None:
            return await self.get(eid)  # answered between our read and now: the answer has committed
        try:
            answer = await asyncio.wait_for(asyncio.shield(fut), timeout=timeout)
        except TimeoutError:
            return q, None
        except QuestionEnded as ended:
            raise Gone(f"{eid} was abandoned: {ended.reason}", state="abandoned") from None
        # the answer in hand is the committed one; the caller shows it redacted like the stored copy
        stored = answer.model_copy(update={"content": redact(answer.content, routing.secret_fields(q.requested_schema))})
        return q, stored

    async def audit(self, after: int = 0, limit: int = 1000, kinds: list[str] | None = None,
                    **filters: str | None) -> list[AuditRecord]:
        rows = await self.store.audit_rows(filters, after=after, limit=limit, kinds=kinds)
        return [AuditRecord.model_validate({**doc, "seq": seq}) for seq, _at, _kind, doc in rows]
