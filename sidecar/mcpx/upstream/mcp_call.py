"""One MCP call's side of its server's requests (hooks.ServerToCall): the questions its server asks reach the
broker as the call's, its requests for the calling client reach that client, its progress reaches whoever called.

Every question a call raises carries the call's session, trace and task, so it is offered to the session that
caused it and to nobody else. What a restart re-drives a modern call from (`Resume`) is kept here and handed to
the call (`Call.remember`) each time it changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcpx.broker.broker import Broker, Handle, InvalidQuestion
from mcpx.broker.models import REDACTED, Action, Answer, Elicitation, OpenRequest, StoredTask, made
from mcpx.broker.refusals import QuestionEnded
from mcpx.call.deadline import PausableDeadline
from mcpx.call.failures import CallError
from mcpx.call.record import Call
from mcpx.call.request import Slot
from mcpx.mcp import jsonrpc
from mcpx.mcp.input_required import InputRequired
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.protocol import ElicitParams, Era
from mcpx.upstream.connection import UpstreamConnection
from mcpx.upstream.resume import Resume
from mcpx.upstream.roots import per_caller, roots_of

log = logging.getLogger("mcpx.upstream")


REASON_META = "io.mcpx/reason"


def elicit_result(answer: Answer) -> dict[str, Any]:
    """The ElicitResult an upstream gets: decline stays decline, cancel (and expiry) stays cancel. The reason a
    decline or cancel was given with (the person's words in a dialog, the agent's) goes along in _meta: the protocol
    has no field for it, and a server that reads it can do better than try again blindly."""
    return result_of(answer.action, answer.content, answer.reason)


def result_of(action: Action, content: dict[str, Any] | None, reason: str | None) -> dict[str, Any]:
    """`elicit_result` of an answer's words, before its Answer is built (McpCallHooks.ask's early reply)."""
    out: dict[str, Any] = {"action": action}
    if action == "accept" and content is not None:
        out["content"] = content
    if action != "accept" and reason:
        out["_meta"] = {REASON_META: reason}
    return out


class McpCallHooks:
    """The hooks one MCP call offers its server (hooks.ServerToCall) on one connection: questions go to the broker."""

    def __init__(self, broker: Broker, call: Call, conn: UpstreamConnection, deadline: PausableDeadline,
                 save: Callable[[], Awaitable[None]]) -> None:
        self.broker = broker
        self.call = call
        self.conn = conn
        self.deadline = deadline
        self._save = save  # the call as it stands, stored now (its scope's `save`)
        # what a restart re-drives the call from: the round in flight, or the task the server made of it
        self.resume = Resume.model_validate(call.remembered) if call.remembered else None
        self.rounds = 0  # rounds of questions answered through these hooks (a re-driven retry was taken)
        # completions the server announced for a question still being opened (they come on their own task)
        self._completed_early: set[str] = set()
        self._following = False  # the call became a task: its deadline stands still (following)
        # a task's questions are opened one at a time (answer_input): made by the first, as few calls' servers ask
        self._opening: asyncio.Lock | None = None
        self._withdrawn: dict[str, str] = {}  # a task's questions the server stopped asking: why they end

    def _remember(self, resume: Resume | None) -> None:
        self.resume = resume
        self.call.remember(resume.stored() if resume is not None else None)

    def roots(self) -> list[dict[str, Any]]:
        return roots_of(self.conn.entry, self.call.request.cwd)

    def client_roots(self) -> bool:
        """Whether roots/list goes to the calling client: it declared roots, and the server's roots are its caller's."""
        return self.call.request.client_serves("roots") and per_caller(self.conn.entry)

    def fixed_answer(self, method: str) -> dict[str, Any] | None:
        if method == "roots/list" and not self.client_roots():
            return {"roots": self.roots()}
        return None

    async def client_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        r = self.call.request
        serves = self.client_roots() if method == "roots/list" else r.client_serves("sampling")
        if serves:
            return await self.via_client(f"{method}#{len(self.call.slots) + len(self.call.questions)}", method, params)
        if (fixed := self.fixed_answer(method)) is not None:
            return fixed
        raise RpcError(jsonrpc.METHOD_NOT_FOUND, "mcpx offers no sampling to this call (its caller did not declare it)")

    def _slot(self, key: str, method: str, params: dict[str, Any]) -> Slot:
        return Slot(key, method, params, asyncio.get_running_loop().create_future())

    async def await_slot(self, slot: Slot) -> dict[str, Any]:
        self.deadline.pause()  # the client may be asking a model or a person: that time is not the server's
        try:
            return await slot.future
        finally:
            self.deadline.resume()
            self.call.slot_closed(slot.key)

    async def via_client(self, key: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Hand a request to the calling client (the surface serves the call's slots) and wait for its answer."""
        slot = self._slot(key, method, params)
        self.call.slot_opened(slot)
        return await self.await_slot(slot)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """A notification the server sent about this call (progress, log messages): relayed to whoever called.

        Progress does not move our deadline: it only proves the server is alive. The last report is kept on the
        call, for whoever follows it without a relay (`mcpx call` on a terminal, GET /v1/tasks/{id}).
        """
        if method == "notifications/progress":
            self.call.progressed({k: params[k] for k in ("progress", "total", "message") if k in params})
            if params.get("progressToken") is None:
                return  # the caller asked for no progress: kept on the call only
        relay = self.call.request.relay
        if relay is not None:
            try:
                await relay(method, params)
            except Exception as exc:  # the caller went away; the call goes on
                log.debug("relaying %s for %s failed: %s", method, self.call.id, exc)

    def _open_request(self, params: ElicitParams, upstream_id: str | None) -> OpenRequest:
        """Made, not validated again (issue 39: a question built without validating models twice): the server's
        words were validated as `params` (ElicitParams), the rest is the call's own, validated as it came in."""
        r = self.call.request
        mode = params.effective_mode
        return made(OpenRequest, {
            "session": r.session, "session_source": r.session_source, "server": r.server, "tool": r.tool,
            "mode": mode, "message": params.message,
            "requested_schema": params.requested_schema if mode == "form" else None,
            "url": params.url if mode == "url" else None, "upstream_id": upstream_id or params.elicitation_id,
            "trace": self.call.trace, "parent": r.parent, "task": self.call.id, "meta": params.meta,
            "pid": self.conn.pid, "policy_mode": r.policy_mode,
        })

    async def open(self, params: ElicitParams, era: Era,
                   round_record: Callable[[Elicitation, bool], StoredTask] | None = None,
                   upstream_id: str | None = None) -> Handle:
        """Open the server's question through the broker, as its era needs. Broker.open's arguments, and why:

        - legacy (`ask`): the call is stored with the question, in its commit (`task`), and the call's
          watchers are told at once, so a restart knows what was promised before anyone is told. The answer may
          reach the server before it commits (`eager`): nothing re-drives a legacy call, so nothing could re-send
          what its server was told. When the call's own MCP client can answer questions, that client is asked
          first: `committing` is the call's own step (`Call.ask_first`), which returns once the client's request
          is written; the commit is queued then, and waits for the client's answer and the call's end to commit
          with them (docs/internals.md, "A legacy call's question reaches its own client first").
        - modern (`answer_round`): never eager, since a restart re-drives the call with the answer the store
          holds. The round's last question is stored with `round_record` (the call with the round's Resume); the
          watchers are told once the whole round is open. A task's question (`answer_input`) is opened the same
          way, its key the question's `upstream_id` and `round_record` the task's Resume with that key.
        """
        legacy = era == "legacy"
        r = self.call.request
        client_first = legacy and r.surface == "mcp" and r.client_serves("elicitation")
        told: Handle | None = None
        stored = False

        async def committing(handle: Handle) -> None:
            nonlocal told
            told = handle
            await self.call.ask_first(handle.elicitation)

        async def left(handle: Handle) -> None:
            # the call ended while its question was being stored (its server went away, its client cancelled): the
            # question, committed, is not left pending with nobody to hear its answer
            nonlocal stored
            stored = True
            self.call.raised(handle.id)
            if not handle.done() and not self.call.suspended:
                self.call.abandoning(handle.id)
                await self.broker.abandon(handle.id, self.abandon_reason(handle.id))

        # opened in this task's own step, no task between: a question for the call's own client is written to it
        # in the turn its server's request is handled (Broker.open's `committing`)
        try:
            handle = await self.broker.open(self._open_request(params, upstream_id),
                                            self.call.stored_with if legacy else round_record,
                                            committing if client_first else None, eager=legacy, left=left)
        except asyncio.CancelledError:
            if told is not None and not stored:  # its client was asked, and it was never stored: withdrawn
                self.call.withdrawn(told.id)
            raise
        except InvalidQuestion as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"mcpx refused this elicitation: {exc.message}") from None
        except Exception:
            if told is not None:  # it could not be stored: the client asked meanwhile has that request withdrawn
                self.call.withdrawn(told.id)
            raise
        if told is None:
            self._opened(handle, tell=legacy)
        if legacy:
            self.call.keep()
        if params.elicitation_id is not None and params.elicitation_id in self._completed_early:
            await self.complete(params.elicitation_id)
        return handle

    def _opened(self, handle: Handle, tell: bool = True) -> None:
        """The question is the call's (open if it waits). A modern round's questions are told once the whole round
        is open (`tell` False: they are the call's now, and its watchers hear the round's last change)."""
        self.call.asked(handle.elicitation, pending=not handle.done(), tell=tell)

    async def wait(self, handle: Handle) -> Answer:
        """Wait for a person (the deadline stands still meanwhile); abandon the question if the call ends first."""
        self.deadline.pause()
        try:
            answer = await handle.answer()
            if handle.elicitation.secret_fields:
                self._handed(handle.elicitation, answer.content)
            return answer
        except QuestionEnded as ended:
            # policy `error`: the call fails loudly, naming the question (and the other questions it leaves)
            reason = (f"{self.call.request.server}.{self.call.request.tool} needed an answer to {handle.id} "
                      f"({handle.elicitation.message!r}) and none may be given: {ended.reason}")
            self.call.note_end_reason(reason)
            raise CallError(reason) from None
        except asyncio.CancelledError:
            if not self.call.suspended:
                self.call.abandoning(handle.id)
                await self.broker.abandon(handle.id, self.abandon_reason(handle.id))
            raise
        finally:
            self.deadline.resume()
            self.call.settled(handle.id)

    def _handed(self, q: Elicitation, content: dict[str, Any] | None) -> None:
        """The credentials an answer hands the server: kept out of what the call returns (Call.scrub)."""
        for name in q.secret_fields:
            value = (content or {}).get(name)
            if isinstance(value, str) and len(value) >= 4:
                self.call.handed_secret(value)

    def abandon_reason(self, eid: str) -> str:
        if eid in self._withdrawn:
            return self._withdrawn[eid]
        if self.call.end_reason:
            return self.call.end_reason
        peer = self.conn.peer
        if peer is not None and not peer.alive:
            return f"server {self.conn.name!r} went away while {eid} was open: {peer.close_reason}"
        return f"the call {self.call.trace} ended before {eid} was answered"

    async def ask(self, params: ElicitParams, reply: Callable[[dict[str, Any]], bool] | None = None,
                  ) -> dict[str, Any]:
        """A legacy server's elicitation/create, on its own request: the call itself runs on in the runner.

        An MCP client that can answer questions is asked while the question commits, and the server is handed
        the answer while the answer commits: a legacy call does not outlive its daemon, so nothing re-drives it,
        nor could re-send what the server was told; the client's answer commits after the question.

        `reply`: writes the request's reply at once, from whatever step has it (`Peer.reply_early`; False if it
        cannot). With it, an answer the broker hands over before it commits reaches the server in the step the
        broker takes it, before its record is built and without this task's turn (Broker.hand_first); what this
        returns is then not written again. The answer is recorded, and `elicit.resumed` written, as before."""
        handle = await self.open(params, "legacy")
        handed: list[bool] = []  # its reply was written early: what this returns is not written
        if reply is not None and not handle.done():
            q = handle.elicitation

            def hand(action: Action, content: dict[str, Any] | None, reason: str | None) -> None:
                if q.secret_fields:
                    self._handed(q, content)  # kept out of the call's result before the server can send it
                if reply(result_of(action, content, reason)):
                    handed.append(True)

            self.broker.hand_first(q.id, hand)
        try:
            answer = await self.wait(handle)
        except CallError as exc:
            self.call.fail(str(exc))  # the runner waits for the server's result: the call ends there, failed
            raise RpcError(jsonrpc.INTERNAL_ERROR, str(exc)) from None
        finally:
            self.broker.hand_first(handle.id, None)
        self.broker.mark_resumed(handle.elicitation, {"action": answer.action, "era": "legacy"})
        return {} if handed else elicit_result(answer)

    async def complete(self, elicitation_id: str) -> None:
        """notifications/elicitation/complete: the server saw the out-of-band step finish."""
        for eid, q in list(self.call.open.items()):
            if q.mode == "url" and q.upstream_id == elicitation_id:
                try:
                    await self.broker.answer(eid, "accept", by="upstream", reason="the server reported completion")
                except Exception as exc:  # already answered: the person got there first
                    log.debug("completion for %s ignored: %s", eid, exc)
                return
        # A server may announce completion right behind its request, before mcpx has finished opening the
        # question (the two are handled on separate tasks): kept, and applied once the question is open.
        log.debug("completion for elicitationId %r before its question is open: kept for it", elicitation_id)
        self._completed_early.add(elicitation_id)

    def _planned(self, key: str, req: Any) -> tuple[str, Any]:
        """One of inputRequests, checked: its method and params (an elicitation's as ElicitParams); CallError for
        a request that is invalid or that mcpx did not declare (sampling, unless the calling client serves it)."""
        method = req.get("method") if isinstance(req, dict) else None
        if method == "elicitation/create":
            try:
                return method, ElicitParams.model_validate(req.get("params") or {})
            except Exception as exc:
                raise CallError(f"server {self.conn.name!r} sent an invalid elicitation in inputRequests"
                                 f"[{key!r}]: {exc}") from None
        if method == "roots/list" or (method == "sampling/createMessage"
                                      and self.call.request.client_serves("sampling")):
            return method, req.get("params") or {}
        raise CallError(f"server {self.conn.name!r} asked for {method!r} in inputRequests[{key!r}], which "
                         "mcpx did not declare to it")

    async def answer_round(self, asked: InputRequired, round_no: int) -> dict[str, Any]:
        """One broker question per elicitation in inputRequests, roots and sampling to the client (or roots
        from mcpx); once all are answered, the retry's inputResponses, under the server's own keys."""
        self.rounds += 1
        requests = asked.input_requests or {}
        planned = [(key, *self._planned(key, req)) for key, req in requests.items()]  # all checked before any acts
        static: dict[str, Any] = {}
        handles: dict[str, Handle] = {}
        slots: dict[str, Slot] = {}
        asks: list[tuple[str, ElicitParams]] = []
        for key, method, params in planned:  # all of them registered before the caller is told of any
            if method == "elicitation/create":
                asks.append((key, params))
            elif method == "roots/list" and not self.client_roots():
                static[key] = {"roots": self.roots()}
            else:
                slots[key] = self._slot(key, method, params)

        def resume(last: tuple[str, str] | None = None) -> Resume:
            """The round so far; `last`: the key and id of the question being opened, which has no handle yet."""
            keys = {k: h.id for k, h in handles.items()} | (dict([last]) if last is not None else {})
            return Resume(round=round_no, request_state=asked.request_state, keys=keys, static=static)

        for i, (key, params) in enumerate(asks):
            # the last question carries the round's resume state in its own commit: what a restart re-drives
            # from is stored exactly when the last question is
            with_round = (lambda q, pending, k=key: self.call.stored_with(q, pending, resume((k, q.id)).stored())
                          ) if i == len(asks) - 1 else None
            handles[key] = await self.open(params, "modern", with_round)
            self.call.keyed(handles[key].id, key)
        self._remember(resume())
        if asks:
            self.call.keep()
        else:
            await self._save()
        for slot in slots.values():
            self.call.slot_opened(slot)
        self.call.round_opened()  # the whole round is open: the watchers are told
        waits = [asyncio.ensure_future(self.wait(h)) for h in handles.values()]
        try:
            answers = await asyncio.gather(*waits)
        except BaseException:
            for other in waits:  # one failed, or the call is cancelled: the other questions are not waited for
                other.cancel()
            raise
        responses = dict(static)
        for key, slot in slots.items():
            responses[key] = await self.await_slot(slot)
        for (key, handle), answer in zip(handles.items(), answers, strict=True):
            responses[key] = elicit_result(answer)
            self.broker.mark_resumed(handle.elicitation, {"action": answer.action, "era": "modern", "round": round_no})
        return responses

    # ---- a call the server made a task (mcp/tasks.py follows it; these are its hooks)

    async def following(self, task_id: str) -> None:
        """The task's id is stored with the call at once (the spec asks clients to persist it): a restart follows
        the task again. The call's own timeout stops here for good: the server answers each poll (each bounded on
        its own), and the task's ttl is the server's backstop for work that runs long by design."""
        if not self._following:
            self._following = True
            self.deadline.pause()
        if self.resume is None or self.resume.task != task_id:
            self._remember(Resume(round=0, task=task_id))
            await self._save()
            self.call.became_task(task_id)  # a transparent client's call is a task from now on (surface/driver.py)

    def keeps_going(self) -> bool:
        return self.call.suspended

    async def answer_input(self, key: str, request: Any) -> dict[str, Any]:
        """One of the task's inputRequests: an elicitation is one broker question (the key its upstreamId; a key
        a restart finds stored is that same question, re-attached), roots and sampling go as in a round. The
        response, once given: what tasks/update carries under `key`."""
        method, params = self._planned(key, request)
        if method == "roots/list" and not self.client_roots():
            return {"roots": self.roots()}
        if method != "elicitation/create":
            return await self.via_client(key, method, params)
        resume = self.resume
        assert resume is not None and resume.task is not None  # following() came first
        stored = resume.keys.get(key)
        if stored is not None:
            return await self._reattached(stored)

        def record(q: Elicitation, pending: bool) -> StoredTask:
            resume.keys[key] = q.id  # in this commit and every later one: each question's commit holds them all
            self._remember(resume)
            return self.call.stored_with(q, pending, resume.stored())

        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:  # one at a time: each commit's keys include every question opened before it
            handle = await self.open(params, "modern", record, upstream_id=key)
        self.call.keyed(handle.id, key)
        self.call.keep()
        self.call.round_opened()
        answer = await self.wait(handle)
        self.broker.mark_resumed(handle.elicitation, {"action": answer.action, "era": "modern", "task": resume.task})
        return elicit_result(answer)

    async def _reattached(self, eid: str) -> dict[str, Any]:
        """A question a daemon before this one opened for the task: its answer if it has one (sent again: the
        server ignores an answer to what it no longer asks), else it is waited for like any."""
        q, answer = await self.broker.get(eid)
        if answer is None and q.state == "pending":
            handle = self.broker.handle(eid, q)
            if handle is None:
                raise CallError(f"{eid} cannot be re-attached after the restart")
            self._opened(handle)
            answer = await self.wait(handle)
        if answer is None:  # it ended without an answer (abandoned): the server is not left waiting for it
            return {"action": "cancel"}
        self.broker.mark_resumed(q, {"action": answer.action, "era": "modern", "afterRestart": True})
        return usable(answer)

    async def withdrawn(self, key: str) -> None:
        """Said before the question's wait is cancelled: the abandonment that follows gives this reason."""
        for eid, k in self.call.keys.items():
            if k == key:
                self._withdrawn[eid] = (f"server {self.conn.name!r} no longer asks it: its task went on without "
                                        "this answer")


def usable(answer: Answer) -> dict[str, Any]:
    """A stored answer as the ElicitResult to send after a restart: never one whose credential was redacted."""
    if answer.content and REDACTED in answer.content.values():
        raise CallError(f"the answer to {answer.id} held a credential, which mcpx never stores; after the "
                         "restart the call cannot be re-driven with it — run the call again")
    return elicit_result(answer)
