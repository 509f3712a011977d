"""A tools/call to an upstream tool, carried for either era to where this client can take it.

Legacy clients are asked mid-flight (elicitation/create on the request's own stream); modern
clients get `input_required` and answer on their retry, which carries a signed requestState.
A question the client cannot ask (it declared no such mode, or it is the person's and this is
an agent) gets, after elicit.grace, an early result it can act on while the call keeps running.
A modern client that declares the Tasks extension gets a task instead, once the call waits on anything or
runs past elicit.grace (surface/tasks_extension.py): the call goes on in the daemon, and the task reports it. On
/mcp/SERVER it gets one exactly when the server made the call a task (its declaration is passed on), at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Coroutine
from typing import Any

from mcpx.broker.broker import Broker
from mcpx.broker.models import Elicitation, SessionSource
from mcpx.broker.refusals import AlreadyAnswered, Gone, InvalidContent, NotFound, PresenceNeeded
from mcpx.call.lean import LeanCall, Settled
from mcpx.call.record import Call, FirstAsker
from mcpx.call.request import CallRequest, Slot
from mcpx.config.source import ConfigSource
from mcpx.mcp import jsonrpc
from mcpx.mcp.input_required import InputRequired, Retry
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.outbound import Asked, Outbound, PeerOutbound
from mcpx.mcp.peer import Peer, PeerClosed, Sent
from mcpx.mcp.protocol import META_LOG_LEVEL
from mcpx.mcp.tasks import is_task
from mcpx.surface.answers import SLOT, client_content, give, problems
from mcpx.surface.client_state import ClientState, shaped
from mcpx.surface.following import Following
from mcpx.surface.plain_call import PlainCall
from mcpx.surface.request_state import RequestStates, binding
from mcpx.surface.results import completed_result, task_result, waiting_on, waiting_result, with_notes
from mcpx.surface.tasks_extension import TasksExtension
from mcpx.upstream.gateway import Gateway, UnknownServer

log = logging.getLogger("mcpx.surface")

HEARTBEAT = 10.0  # progress notifications keep a host's timeout from firing while a call is honestly busy
ANSWERS = ("accept", "decline", "cancel")  # a client's reply to elicitation/create that is an answer
BY_CLIENT = "person:mcp-client"  # who answered, when the call's own MCP client did


class CallDriver:
    def __init__(self, gateway: Gateway, broker: Broker, settings: ConfigSource, states: RequestStates,
                 tasks: TasksExtension) -> None:
        self.gateway = gateway
        self.broker = broker
        self.settings = settings
        self.states = states
        self.tasks = tasks

    async def call(self, state: ClientState, name: str, server: str, tool: str, arguments: dict[str, Any],
                   session: str, source: SessionSource, params: dict[str, Any], meta: dict[str, Any],
                   out: Outbound) -> dict[str, Any]:
        """`name` is the tool as the client called it; a modern retry must name it, its arguments and session again."""
        bound = binding(name, arguments, session) if state.era == "modern" else ""  # only modern retries use it
        token = meta.get("progressToken")
        if state.era == "modern" and "requestState" in params:
            task, late = await self._take_retry(params, bound, session, state.unattended)
            return await self.follow(task, self.following(task, state, out), state, out, bound, token, late)
        request = self._request(server, tool, arguments, session, source, state, out, meta)
        if not state.takes_tasks:
            # a plain call (call/lean.py): written from this task; followed only once it is promoted
            waiting = _Waiting(self, state, out)
            if (lean := self._lean(request, waiting.settled)) is not None:
                return await waiting.outcome(lean, bound, token)
        task = await self._start(request)
        following = self.following(task, state, out)
        # one loop turn: the call's own task takes its first step, which sends the request upstream, before this sets
        # up to wait on it; that setup then runs while the server works, not on the request's way
        await asyncio.sleep(0)
        return await self.follow(task, following, state, out, bound, token, [])

    def take_now(self, state: ClientState, server: str, tool: str, arguments: dict[str, Any], session: str,
                 source: SessionSource, meta: dict[str, Any], msg: Message, peer: Peer) -> PlainCall | None:
        """A legacy client's plain call taken in the turn its request was read (surface/plain_call.py): written
        upstream now, its reply written back from the upstream reply's own turn; None when it is not one."""
        out = PeerOutbound(peer, msg["id"])
        taken = PlainCall(self, state, out, msg, meta.get("progressToken"))
        try:
            lean = self.gateway.start_lean(self._request(server, tool, arguments, session, source, state, out, meta),
                                           taken.settled)
        except UnknownServer:
            return None  # the usual way says so, in its words
        if lean is None:
            return None
        taken.lean = lean
        return taken

    def following(self, call: Call, state: ClientState, out: Outbound) -> Following:
        """Set up to follow `call` for this client: a legacy client is the call's first asker."""
        return Following(call, (lambda following: self._first_asker(call, state, out, following))
                         if state.era == "legacy" else None)

    async def follow(self, task: Call, following: Following, state: ClientState, out: Outbound, bound: str,
                     token: Any, late: list[str]) -> dict[str, Any]:
        """Follow a call for this client to what it can take (`_drive`); the client withdrawing its request cancels
        the call, the client going away does not (`left`)."""
        try:
            result = await self._drive(task, state, out, bound, token, following)
            return result if is_task(result) else with_notes(result, late)
        except asyncio.CancelledError:
            self.left(task, out.withdrawn())
            raise
        finally:
            following.close()

    def left(self, task: Call, withdrawn: bool) -> None:
        """The client withdrew its request of `task` (notifications/cancelled: the call is cancelled), or went."""
        if withdrawn:
            self.gateway.cancel_now(task.id, "cancelled by the MCP client")
        else:
            # The client went away (its host stopped `mcpx serve`, its HTTP session ended) or the daemon is
            # stopping: that is not a cancel. The call goes on in the daemon, as if its result had been
            # returned early: the questions it has open, or opens later, stay answerable from every other
            # surface, and its result is kept for `mcpx task result`.
            log.info("the client of %s (%s.%s) went away; the call goes on: mcpx task result %s", task.trace,
                     task.request.server, task.request.tool, task.id)

    def _request(self, server: str, tool: str, arguments: dict[str, Any], session: str, source: SessionSource,
                 state: ClientState, out: Outbound, meta: dict[str, Any]) -> CallRequest:
        token = meta.get("progressToken")

        async def relay(method: str, params: dict[str, Any]) -> None:
            if method == "notifications/progress" and token is None:
                return
            await out.notify(method, params)

        forwarded: dict[str, Any] | None = None  # what of _meta goes on to the server (a loop: no comprehension's call)
        if meta:
            for k in ("progressToken", META_LOG_LEVEL):
                if k in meta:
                    forwarded = forwarded or {}
                    forwarded[k] = meta[k]
        return CallRequest(server=server, tool=tool, arguments=arguments, session=session, session_source=source,
                           cwd=state.cwd, surface="mcp", meta=forwarded, relay=relay,
                           followed=state.era == "modern" and state.takes_tasks, client_caps=state.declared(),
                           transparent=state.scope is not None, era=state.era)

    def _lean(self, request: CallRequest, settled: Settled) -> LeanCall | None:
        try:
            return self.gateway.start_lean(request, settled)
        except UnknownServer as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, str(exc)) from None

    async def _start(self, request: CallRequest) -> Call:
        try:
            return await self.gateway.start_call(request)
        except UnknownServer as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, str(exc)) from None

    async def _heartbeat(self, out: Outbound, token: Any, started: float, task: Call) -> None:
        if token is not None:
            await out.notify("notifications/progress", {"progressToken": token, "progress": time.monotonic() - started,
                                                        "message": waiting_on(task)})

    async def _drive(self, task: Call, state: ClientState, out: Outbound, bound: str, token: Any,
                     following: Following) -> dict[str, Any]:
        """Carry a call to where this client can take it: its result; the questions and requests this client
        can answer (mid-flight for legacy, input_required for modern); or, for what it cannot, after
        elicit.grace, an early result it can act on while the call keeps running."""
        grace = self.settings.config.elicit.grace
        started = time.monotonic()
        stuck_since: float | None = None
        takes_tasks = state.takes_tasks
        as_task = takes_tasks and not state.mirrors_tasks
        mirrored = takes_tasks and state.mirrors_tasks
        serving, given_up, watch = following.serving, following.given_up, following.watch
        legacy = state.era == "legacy"
        while True:
            if task.done:
                return task_result(task)
            if mirrored and task.upstream_task is not None:
                return self.tasks.handle(task, state)  # the server made the call a task: so does mcpx, at once
            if as_task:  # surface/tasks_extension.py: a call that waits on anything, or runs past the grace, is a task
                left = grace - (time.monotonic() - started)
                if task.open or task.slots or left <= 0:
                    return self.tasks.handle(task, state)
                if not await watch.until(lambda: task.done or bool(task.open or task.slots),
                                         min(left, HEARTBEAT)):
                    await self._heartbeat(out, token, started, task)
                continue
            # what moves from here on is counted (Call.arrivals and departures, and the client's dialogs given up):
            # read before the call is looked at, so that nothing that happens after is missed
            seen, seen_gone, seen_given = task.arrivals, task.departures, len(given_up)
            open_, slots = task.open, task.slots
            # a question this client was asked and could not answer (it answered badly three times, or not at
            # all) is one it cannot ask: it gets the early result saying where it waits, not silence
            askable: dict[str, Elicitation] = {}
            unaskable = False
            if open_:
                passed = task.passed_over
                for eid, q in open_.items():
                    if eid not in given_up and eid not in passed and state.can_ask(q):
                        askable[eid] = q
                    else:
                        unaskable = True
            if not legacy and (askable or slots) and not unaskable:
                return self._input_required_result(task, state, askable, bound)
            if legacy:
                for eid, q in askable.items():
                    if eid not in serving:
                        self._serve(following, eid, self._ask_client(q, task, state, out))
                for key, slot in list(slots.items()):
                    if key not in serving:
                        self._serve(following, key, self._serve_slot(slot, out))
                for key in [k for k, t in serving.items() if not t.done() and k not in open_ and k not in slots]:
                    serving[key].cancel()  # answered elsewhere: withdraw the client's dialog
            if unaskable:
                stuck_since = stuck_since or time.monotonic()
                left = grace - (time.monotonic() - stuck_since)
                if left <= 0:
                    result = waiting_result(task, state.tool_prefix)
                    if state.modes:
                        # a client that can ask was shown the tool's outputSchema (surface/naming.py): an early
                        # result must be an error, or a strict client (the mcp SDK's, Claude Code) refuses it for
                        # its missing structuredContent, and the agent never reads where the question waits
                        result["isError"] = True
                    return result
            else:
                stuck_since, left = None, HEARTBEAT

            def moved(seen: int = seen, seen_gone: int = seen_gone, seen_given: int = seen_given,
                      stuck: bool = unaskable) -> bool:
                if task.arrivals != seen or len(given_up) != seen_given:
                    return True
                # a question that settled (the client's own answer, nearly always) or a request that closed moves
                # nothing here unless the client is still being asked something (which may be withdrawn now), or
                # a question it cannot be asked waited (the early result is due no more): one wake a round trip less
                return task.departures != seen_gone and (stuck or any(not t.done() for t in serving.values()))

            if not await watch.until(moved, min(left, HEARTBEAT), told=True):
                await self._heartbeat(out, token, started, task)

    @staticmethod
    def _serve(following: Following, key: str, asking: Coroutine[Any, Any, bool]) -> asyncio.Task[bool]:
        """Ask the client (a question, or a request for it) in a task of its own, which `following` serves."""
        serving = asyncio.create_task(asking)
        following.served(key, serving)
        return serving

    def _first_asker(self, task: Call, state: ClientState, out: Outbound, following: Following) -> FirstAsker:
        """The call's step of asking this client first (Call.ask_first): a question it can take is written to it in
        this step, the one its server's request is handled in (no task between), and its reply is then taken in the
        turn it is read (`_FirstAsked`); the step returns once the request is written, or could not be."""
        async def first(q: Elicitation) -> None:
            if q.id in following.serving or not state.can_ask(q):
                return
            params = shaped(q, state)
            asked: Asked | Exception
            try:
                asked = await out.send_request("elicitation/create", params)
            except Exception as exc:  # the task that waits for the reply takes it up, as if it had written it
                asked = exc
            if isinstance(asked, Sent) and not state.unattended:
                # no task waits for its reply: its answer is handed on in the turn the reply is read
                following.served(q.id, _FirstAsked(self, q, task, state, out, params, asked).asking)
                return
            waiting = self._serve(following, q.id, self._ask_client(q, task, state, out, (params, asked)))
            if not isinstance(asked, Exception):
                waiting.add_done_callback(functools.partial(_unheard, asked))
        return first

    # ---- legacy clients: mid-flight requests

    def _took(self, q: Elicitation, task: Call, asked: Sent) -> bool:
        """The client's first reply to `q`, in the turn it is read: True once its answer is handed to the call's eager
        asker now; False when it is left to the dialog (an error, what is no answer, what is refused)."""
        if asked.future.cancelled() or asked.future.exception() is not None:
            return False
        reply = asked.future.result().get("result")
        return isinstance(reply, dict) and (action := reply.get("action")) in ANSWERS and self.broker.hand_over(
            q.id, action, client_content(q, reply), by=BY_CLIENT, session=task.request.session)

    async def _ask_client(self, q: Elicitation, task: Call, state: ClientState, out: Outbound,
                          first: tuple[dict[str, Any], Asked | Exception] | None = None) -> bool:
        """Put `q` to this client; True once it is answered (here or elsewhere), False if the client could not
        answer it (an error, a timeout, three answers that did not fit): it then waits for other surfaces.
        `first`: the question as written to it already, and the request (or why it could not be written)."""
        asked: Asked | Exception | None = None
        if first is not None:
            params, asked = first
        else:
            params = shaped(q, state)
        for _attempt in range(3):
            try:
                if isinstance(asked, Exception):
                    raise asked
                if asked is None:
                    asked = await out.send_request("elicitation/create", params)
                reply = await asked.reply(timeout=q.seconds_left + 5)
            except (RpcError, TimeoutError, PeerClosed) as exc:
                log.info("client could not answer %s (%s); it stays open for other surfaces", q.id, exc)
                return False
            asked = None  # asked again, it is written again
            action = reply.get("action")
            if state.unattended:
                # nobody is at the host: its cancel is its own (print mode's), and anything else is what its hook
                # read back from mcpx, where the answer is already recorded; neither is recorded as an answer
                log.info("the unattended host replied %r to %s; not an answer: it waits for the person elsewhere",
                         action, q.id)
                return q.id not in task.open
            if action not in ANSWERS:
                log.info("client answered %s with %r; it stays open", q.id, action)
                return False
            try:
                # the client's reply has no reply: nobody is told the answer was stored, so it may wait for company
                await self.broker.answer(q.id, action, client_content(q, reply), by=BY_CLIENT,
                                         session=task.request.session,
                                         acknowledged=False)
                return True
            except InvalidContent as exc:
                params = {**shaped(q, state), "message": f"{shaped(q, state)['message']} (the last answer was not "
                                                         f"accepted: {problems(exc)})"}
            except PresenceNeeded as exc:  # its accept is the person's passkey's (docs/presence.md): asked again,
                # saying so, where the person may still decline or cancel it
                params = {**shaped(q, state), "message": f"{shaped(q, state)['message']} ({exc.message})"}
            except (AlreadyAnswered, Gone, NotFound):  # NotFound: asked while it committed, it could not be stored
                return True
        log.info("client answered %s three times with content that does not fit; it stays open for other surfaces",
                 q.id)
        return False

    @staticmethod
    async def _serve_slot(slot: Slot, out: Outbound) -> bool:
        """roots/list or sampling/createMessage the upstream asked of this client: the client answers it (its error
        too: the server hears it). True: there is nothing for anyone else to answer."""
        try:
            result = await out.request(slot.method, slot.params)
        except RpcError as exc:
            if not slot.future.done():
                slot.future.set_exception(exc)
            return True
        if not slot.future.done():
            slot.future.set_result(result)
        return True

    # ---- modern clients: input_required, answered by the client's retry

    def _input_required_result(self, task: Call, state: ClientState, askable: dict[str, Elicitation],
                        bound: str) -> dict[str, Any]:
        requests: dict[str, Any] = {}
        keys: dict[str, str] = {}
        for eid, q in askable.items():
            key = task.keys.get(eid, eid)  # the upstream's own key, when it gave one
            requests[key] = {"method": "elicitation/create", "params": shaped(q, state)}
            keys[key] = eid
        for key, slot in task.slots.items():
            requests[key] = {"method": slot.method, "params": slot.params}
            keys[key] = SLOT + key
        return InputRequired(input_requests=requests,
                             request_state=self.states.seal(task.id, len(task.questions), keys, bound)).wire()

    async def _take_retry(self, params: dict[str, Any], bound: str, session: str, unattended: bool,
                          ) -> tuple[Call, list[str]]:
        """The call a retry's requestState names, its answers given; and what the client is to be told of answers
        that came too late (answered elsewhere first: nothing can withdraw a question handed out in a result)."""
        try:
            retry = Retry.model_validate(params)
        except ValueError:
            retry = None
        sealed = self.states.open(params.get("requestState"), bound)
        task = self.gateway.task(sealed.task)
        if task is None:
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: its call is gone (finished long ago, or "
                                                   "lost in a restart)")
        if retry is None:
            raise RpcError(jsonrpc.INVALID_PARAMS, "inputResponses must be an object")
        replies = {target: retry.input_responses.get(key) for key, target in sealed.questions.items()}
        given = await give(self.broker, task, replies, session, unattended)
        return task, given.late


def _unheard(asked: Asked, waiting: asyncio.Task[bool]) -> None:
    """The task that was to wait for the client's reply was cancelled (the question answered elsewhere, the call
    over), maybe before it began: the request it never waited on is withdrawn, as a cancelled wait withdraws it."""
    if waiting.cancelled():
        asked.abandon()


class _FirstAsked:
    """A question written to the client in the call's own step (`CallDriver._first_asker`), its reply taken in the turn
    it is read, with no task waiting for it: nearly every reply is an answer handed on there (`CallDriver._took`), and
    the dialog is over. Anything else (an error, what is no answer, what is refused) is taken up by the dialog a task
    carries on from that reply (`CallDriver._ask_client`). `asking` is the dialog as its follower serves it: True once
    answered, False if the client could not answer (its timeout too); cancelled (answered elsewhere, the call over),
    the request is withdrawn, as a cancelled wait for its reply withdraws it."""

    def __init__(self, driver: CallDriver, q: Elicitation, task: Call, state: ClientState, out: Outbound,
                 params: dict[str, Any], asked: Sent) -> None:
        self.driver, self.q, self.task, self.state, self.out, self.params, self.asked = (
            driver, q, task, state, out, params, asked)
        loop = asyncio.get_running_loop()
        self.asking: asyncio.Future[bool] = loop.create_future()
        self._rest: asyncio.Task[bool] | None = None  # the dialog carried on from a reply that was not taken
        self._timer = loop.call_later(q.seconds_left + 5, self._expired)  # as `Sent.reply`'s timeout in _ask_client
        asked.when_replied(self._replied)
        self.asking.add_done_callback(self._ended)

    def _replied(self) -> None:
        if self.asking.done():
            return  # withdrawn already: nobody takes the reply
        self._timer.cancel()
        if self.driver._took(self.q, self.task, self.asked):
            self.asking.set_result(True)  # handed over as it was read
            return
        self._rest = asyncio.create_task(self.driver._ask_client(self.q, self.task, self.state, self.out,
                                                                 (self.params, self.asked)))
        self._rest.add_done_callback(self._rest_ended)

    def _rest_ended(self, rest: asyncio.Task[bool]) -> None:
        if self.asking.done() or rest.cancelled():
            return  # it was cancelled as `asking` was
        if (exc := rest.exception()) is not None:
            self.asking.set_exception(exc)
        else:
            self.asking.set_result(rest.result())

    def _expired(self) -> None:
        if self.asking.done():
            return
        log.info("client could not answer %s (no reply in time); it stays open for other surfaces", self.q.id)
        self.asked.give_up()
        self.asking.set_result(False)

    def _ended(self, asking: asyncio.Future[bool]) -> None:
        self._timer.cancel()
        if not asking.cancelled():
            return
        if self._rest is not None:
            self._rest.cancel()  # its wait for a reply, if it is in one, withdraws the request
        else:
            self.asked.abandon()  # withdrawn unless its reply came


class _Waiting:
    """A lean call its caller's task waits on (`CallDriver.call`): its result, or, once promoted, followed."""

    def __init__(self, driver: CallDriver, state: ClientState, out: Outbound) -> None:
        self.driver, self.state, self.out = driver, state, out
        # None: it ended on the lean path; else promoted, and followed from there
        self._settled: asyncio.Future[Following | None] = asyncio.get_running_loop().create_future()

    def settled(self, lean: LeanCall, result: dict[str, Any] | None) -> None:
        if not self._settled.done():  # not given up on (the caller's task cancelled)
            self._settled.set_result(None if result is not None else self.driver.following(lean.call, self.state,
                                                                                            self.out))

    async def outcome(self, lean: LeanCall, bound: str, token: Any) -> dict[str, Any]:
        try:
            following = await self._settled
        except asyncio.CancelledError:
            lean.promote()  # the client withdrew the request, or went away: either is the call's event
            if self._settled.done() and not self._settled.cancelled() and (made := self._settled.result()):
                made.close()  # promoted just before, and not followed
            self.driver.left(lean.call, self.out.withdrawn())
            raise
        if following is None:  # it ended on the lean path (recorded since): nothing happened but its reply
            assert lean.result is not None
            return completed_result(lean.result)  # nothing of a plain call's to scrub (call/lean.py)
        return await self.driver.follow(lean.call, following, self.state, self.out, bound, token, [])
