"""The daemon's calls: started, run to their end and recorded, cancelled, and taken up again after a restart.

A call is kept in memory until there is something to keep: the first question (which a restart must know of), or
its end. A call that just runs and answers costs the store one write, which rides with the next commit.

After a restart, a call its kind remembered something for (upstream/kind.py, `CallScope.remember`: a modern MCP
call's round in flight, or the task its server made of it) is continued by its kind from that; any other call
that was running is failed with the reason, its questions abandoned.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from mcpx.broker.broker import Broker
from mcpx.broker.models import StoredTask, TaskDoc, TaskState
from mcpx.broker.store import QuestionFilter
from mcpx.call.deadline import CallTimeout
from mcpx.call.failures import CallError, UnknownTask
from mcpx.call.lean import Deadlines, LeanCall, SentCall, Settled
from mcpx.call.record import Call
from mcpx.call.request import CallRequest
from mcpx.config.source import ConfigSource
from mcpx.shared.ids import call_ids, is_id

log = logging.getLogger("mcpx.call")

# finished calls kept in memory for mcpx_task_result and /v1/tasks; older ones are read from mcpx.db
KEEP_FINISHED = 256

Work = Callable[[Call], Awaitable[dict[str, Any]]]


class Calls:
    """Every call this daemon runs, and the most recent finished ones.

    `run`: what runs a new call to its result; `follow`: what continues, after a restart, a call whose kind
    remembered how (both the gateway's: they pick the call's kind)."""

    def __init__(self, broker: Broker, settings: ConfigSource, run: Work, follow: Work) -> None:
        self.broker = broker
        self.settings = settings
        self._run = run
        self._follow = follow
        self.live: dict[str, Call] = {}  # running calls, and the most recent finished ones
        # plain calls on the lean path with no Call made (call/lean.py), and those that ended there until forgotten
        self._light: dict[str, LeanCall] = {}
        self._finished: deque[str] = deque()
        self._reaper: asyncio.Task[None] | None = None
        self._deadlines = Deadlines()  # of the calls on the lean path
        # the calls whose ends wait for one commit (Writes.end_call), forgotten from memory once it is done
        self._ending_on: asyncio.Future[Any] | None = None
        self._ending: list[str] = []

    # ---- reading

    def get(self, tid: str) -> Call | None:
        """The call, running or among the last finished; a plain call's on the lean path made now (LeanCall.call)."""
        call = self.live.get(tid)
        if call is None and (lean := self._light.get(tid)) is not None:
            call = lean.call
        return call

    def servers(self) -> set[str]:
        """The servers of the calls in memory."""
        return {c.request.server for c in self.live.values()} | {c.request.server for c in self._light.values()}

    async def doc(self, tid: str) -> TaskDoc:
        if not is_id(tid, "tsk"):
            raise UnknownTask(f"{tid!r} is not a task id (they look like tsk- and 16 hex digits)")
        live = self.get(tid)
        if live is not None:
            return live.doc()
        stored = await self.broker.task(tid)
        if stored is None:
            raise UnknownTask(f"no task {tid}")
        return stored.shown()

    async def listed(self, states: tuple[TaskState, ...], session: str | None = None) -> list[StoredTask]:
        """The calls in `states` (of `session`), newest first: the store's rows, each of this daemon's calls in memory
        as it is now. Memory is ahead of the store (a call's end is written after its result, a plain call's with
        the next commit; a call that never asked has no row until it ends), so a call cancelled or answered a
        moment ago is listed as it ended, and one in flight is listed at all."""
        found = {t.id: t for t in await self.broker.tasks_in(states) if session is None or t.session == session}
        for lean in list(self._light.values()):
            if session is None or lean.request.session == session:
                lean.call  # noqa: B018 -- made now, and kept with the others (listing is not a plain call's way)
        for call in list(self.live.values()):
            if session is not None and call.request.session != session:
                continue
            if call.state in states:
                found[call.id] = call.stored()
            else:
                found.pop(call.id, None)  # the store's row is behind: the call has moved on
        listed = list(found.values())
        listed.sort(key=lambda t: t.updated, reverse=True)
        return listed

    async def save(self, call: Call) -> None:
        call.keep()
        await self.broker.save_task(call.stored())

    # ---- running

    @staticmethod
    def new(request: CallRequest) -> Call:
        tid, trace = call_ids()
        return Call(id=tid, trace=trace, request=request)

    def start(self, request: CallRequest) -> Call:
        call = self.new(request)
        self.live[call.id] = call
        self._run_from(call, self._run(call))
        return call

    def _run_from(self, call: Call, work: Awaitable[dict[str, Any]]) -> None:
        call.started(asyncio.create_task(self._run_to_end(call, work, "running"), name=f"mcpx-call-{call.id}"))

    def leaning(self, request: CallRequest) -> LeanCall:
        """A plain call about to be sent on the lean path (call/lean.py): its ids, no `Call` yet."""
        return LeanCall(self, *call_ids(), request)

    def lean(self, lean: LeanCall, sent: SentCall, settled: Settled) -> LeanCall:
        """A call whose request its kind has sent on the lean path: it runs without a runner until something happens
        to it, then its kind's `taken_on` continues it in one, as a started call runs. `settled`: LeanCall's."""
        self._light[lean.id] = lean
        lean.sent(sent, self._deadlines, settled)
        return lean

    # ---- Keeper: what a lean call needs of its keeper

    def made(self, lean: LeanCall) -> Call:
        """Its `Call`, kept from now on as any call's is (it ends as that call does)."""
        if lean.result is None:
            call = Call(id=lean.id, trace=lean.trace, request=lean.request, era=lean.era, created=lean.created)
            self._light.pop(lean.id, None)
        else:  # it ended lean: it stays there too, until forgotten (`_forget_finished` looks in both)
            call = Call(id=lean.id, trace=lean.trace, request=lean.request, era=lean.era, created=lean.created,
                        state="completed", result=lean.result, updated=lean.ended_at)
        self.live[call.id] = call
        return call

    def promoted(self, lean: LeanCall, call: Call) -> None:
        self._run_from(call, lean.taken_on(call))

    def ended(self, lean: LeanCall, result: dict[str, Any]) -> None:
        if lean.made:
            self._ended(lean.call, "completed", result)
            return
        # recorded from the lean call's own fields, as `_ended` records a call the store never heard of
        r = lean.request
        self._committing(self.broker.finish_task(
            lean.stored_row, {"state": "completed", "server": r.server, "tool": r.tool}, tid=lean.id,
            session=r.session, trace=lean.trace, behind=True), lean.id)

    async def _run_to_end(self, call: Call, work: Awaitable[dict[str, Any]], doing: str) -> None:
        """Run a call to its end and record how it ended, in words that name the server and the question."""
        r = call.request
        try:
            call.begun()
            result = await work
        except asyncio.CancelledError:
            if call.suspended:
                return  # the daemon is stopping: the stored state is what the next daemon resumes from
            await self._finish(call, call.end_state, error=call.end_reason or "the call was cancelled")
            return
        except CallError as exc:
            await self._finish(call, "failed", result=exc.result, error=str(exc))
            return
        except CallTimeout as exc:
            await self._finish(call, "failed", error=str(exc))
            return
        except Exception as exc:
            log.exception("call %s failed", call.id)
            await self._finish(call, "failed", error=f"mcpx failed {doing} {r.server}.{r.tool}: "
                                                     f"{type(exc).__name__}: {exc}")
            return
        await self._finish(call, "completed", result=result)

    async def _finish(self, call: Call, state: TaskState, result: dict[str, Any] | None = None,
                      error: str | None = None) -> None:
        for eid in list(call.open):
            await self.broker.abandon(eid, call.end_reason or error or "the call ended")
        self._ended(call, state, result, error)

    def _ended(self, call: Call, state: TaskState, result: dict[str, Any] | None = None,
               error: str | None = None) -> None:
        call.ended(state, result, error)
        data: dict[str, Any] = {"state": state, "server": call.request.server, "tool": call.request.tool}
        if error:
            data["error"] = call.error  # as call.ended kept it: scrubbed
        if not call.kept:
            # whoever waits for the result heard first (call.ended told them; it is in memory). A call the store
            # never heard of (it never asked) has its end ride with the next commit, within a short horizon, written
            # with the other such ends by one unit: a stream of plain calls costs the store a commit per horizon,
            # not one each, and that commit (its rows built in it) runs on the store's thread, off the loop. Here
            # it is only added to that unit
            self._record_end(call, data, behind=True)
            return
        # the final state and its task.done commit together one loop turn behind (a call the store holds a row of:
        # it says it is running): a callback, not another step of the call's task, queued behind the watchers'
        # wake-ups, so neither building the record nor the commit is in the reply's way
        asyncio.get_running_loop().call_soon(self._record_end, call, data, False)

    def _record_end(self, call: Call, data: dict[str, Any], behind: bool) -> None:
        """`behind`: the store never heard of the call (not `kept`), so nothing durable waits on its end."""
        # the row is built where it commits: a finished call changes no more, so its thread may read it
        self._committing(self.broker.finish_task(call.stored_row, data, tid=call.id, session=call.request.session,
                                                 trace=call.trace, behind=behind), call.id)

    def _committing(self, committed: asyncio.Future[Any], tid: str) -> None:
        """Call `tid`'s end is in `committed`: forgotten from memory once it is done."""
        if committed is not self._ending_on:  # the first end of this commit: one callback for them all
            self._ending_on, self._ending = committed, []
            committed.add_done_callback(functools.partial(self._forget_finished, self._ending))
        self._ending.append(tid)

    def _forget_finished(self, tids: list[str], committed: asyncio.Future[Any]) -> None:
        """Keep the last few finished calls in memory, the rest in the store alone (which answers for them)."""
        if committed.cancelled() or committed.exception() is not None:
            return  # the store does not hold their end: memory stays the only record of it
        self._finished.extend(tids)
        while len(self._finished) > KEEP_FINISHED:
            tid = self._finished.popleft()
            self.live.pop(tid, None)
            self._light.pop(tid, None)  # a plain call that ended lean: here, and in `live` too once read

    async def cancel(self, tid: str, reason: str) -> bool:
        """`cancel_now`, and its end waited for (5 s at most)."""
        call = self.cancel_now(tid, reason)
        if call is None:
            return False
        if call.runner is not None:
            # the call records its own end (_run_to_end); a cancel of this caller is its own, and goes on up
            done, _ = await asyncio.wait({call.runner}, timeout=5)
            if not done:
                log.warning("call %s is still ending 5 s after it was cancelled", tid)
        return True

    def cancel_now(self, tid: str, reason: str) -> Call | None:
        """End a running call now, cancelled for `reason` (its runner records its end); None when none is running."""
        call = self.get(tid)
        if call is None or call.done:
            return None
        call.fail(reason, "cancelled")
        return call

    def servers_gone(self, servers: set[str]) -> None:
        """The config no longer has these servers: their calls fail, saying so."""
        self._make_running()
        for call in list(self.live.values()):
            if not call.done and call.request.server in servers:
                call.fail(f"server {call.request.server!r} was removed from the config during the call", "failed")

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        self._make_running()
        for call in list(self.live.values()):
            if call.done:
                continue
            if call.remembered is not None:
                call.suspend()  # left as stored; the next daemon takes it up
                call.halt()
            else:
                call.fail("the mcpx daemon stopped during the call", "failed")
        runners = [c.runner for c in self.live.values() if c.runner is not None and not c.runner.done()]
        await asyncio.gather(*runners, return_exceptions=True)

    def _make_running(self) -> None:
        """The calls on the lean path have their `Call` made (something is about to happen to them all)."""
        for lean in [lean for lean in self._light.values() if not lean.settled]:
            lean.call  # noqa: B018 -- made now, into `live`

    # ---- after a restart

    async def recover(self) -> None:
        """Take up the calls a daemon before this one left running."""
        for stored in await self.broker.tasks_in(("running", "input-required")):
            calling = stored.transparent
            request = CallRequest(server=stored.server, tool=stored.tool, arguments=stored.arguments,
                                  session=stored.session, session_source=stored.session_source,
                                  parent=stored.parent, cwd=stored.cwd, surface=stored.surface,
                                  policy_mode=stored.policy_mode, transparent=calling is not None,
                                  era=calling.era if calling else None,
                                  client_caps=calling.client_caps if calling else None)
            # the questions table is the truth about which questions the call raised
            raised = [q.id for q in await self.broker.questions(QuestionFilter(task=stored.id))]
            call = Call(id=stored.id, trace=stored.trace, request=request, state=stored.state, era=stored.era,
                        questions=raised, remembered=stored.resume or None, created=stored.created.timestamp(),
                        kept=True)
            self.live[call.id] = call
            if call.remembered and request.server in self.settings.config.servers:
                call.started(asyncio.create_task(
                    self._run_to_end(call, self._follow(call), "re-driving after the restart"),
                    name=f"mcpx-resume-{call.id}"))
            else:
                reason = ("the mcpx daemon restarted during the call; a legacy-era call lives in its server "
                          "process and was lost with it") if call.era == "legacy" else (
                          "the mcpx daemon restarted during the call, which nothing can continue: what it had not "
                          "sent was not sent, and is not sent now (call it again to be asked again)")
                call.note_end_reason(reason)
                for eid in call.questions:
                    await self.broker.abandon(eid, reason)
                await self._finish(call, "failed", error=reason)

    def reap_lapsed(self, lease: float) -> None:
        """A shared store: end the calls of lapsed daemons that nothing can continue."""
        self._reaper = asyncio.create_task(self._reap_lapsed(lease), name="mcpx-reap-lapsed")

    async def _reap_lapsed(self, lease: float) -> None:
        """End the legacy-era calls of daemons whose lease lapsed (their questions can never be delivered), once
        the lease has lapsed and not before; a call its kind can continue waits for its own daemon, which
        continues it when it comes back."""
        while True:
            await asyncio.sleep(max(0.2, lease / 3))
            try:
                for owner, task in await self.broker.lapsed_tasks(("running", "input-required")):
                    if task.resume:
                        continue
                    reason = (f"the mcpx daemon {owner.id} on {owner.host} (user {owner.user}, pid {owner.pid}) "
                              f"stopped answering: its lease lapsed {lease:g}s after its last heartbeat at "
                              f"{owner.heartbeat.isoformat(timespec='seconds')}; a legacy-era call lives in its "
                              "server process and was lost with it")
                    gone = await self.broker.take_over(task, owner.id, reason)
                    if gone:
                        log.info("took over call %s of lapsed daemon %s (%s): abandoned %s", task.id, owner.id,
                                 owner.host, ", ".join(gone))
            except Exception as exc:  # the store away for a while: the next round tries again
                log.warning("looking for the calls of lapsed daemons failed: %s", exc)
