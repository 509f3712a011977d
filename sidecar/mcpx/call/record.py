"""A call as one owned object: its state, changed only by its own methods, each of which tells its observers.

Who changes a call: whatever runs it (call/lifecycle.py: its start and end), the kind of upstream that serves it
(the questions its server asks, the requests for the calling client, a task the server made of it), and the doors
its client answers through (a question passed over, a report that changed). Who watches it: the surface's driver
(surface/driver.py), the task door's followers (surface/tasks_extension.py) and the REST routes' long polls
(api/call_routes.py), each with a `Watch` (`Call.watch`), which wakes on the call's next event, or when its
owner pokes it (the driver, when a request it made of its client ends).

A call that runs costs one `Call`: no task of its own but its runner, no record until it ends (`kept`: the store
holds a row of it only once it asked or a restart found it). A plain call on the lean path (call/lean.py) has none
made unless something reads it or happens to it: its end is recorded from its own fields (`task_row`).

One step is the call's own because two layers meet in it: a legacy call's question that its own MCP client can
answer is asked of that client before its commit is queued (`ask_first`, which the question's opener hands the
broker as `committing`): the client reads the question while its commit waits. Whoever serves the client (the driver)
says how it asks first (`first_asker`), and returns once the request is written; nothing counts loop turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal

from mcpx.broker.models import (
    REDACTED,
    Elicitation,
    StoredTask,
    TaskDoc,
    TaskState,
    TransparentCall,
    made,
    rfc3339_epoch,
)
from mcpx.broker.store import TaskRow
from mcpx.call.request import CallRequest, Slot
from mcpx.shared import wirejson

DONE_STATES = ("completed", "failed", "cancelled")


def task_row(tid: str, trace: str, r: CallRequest, state: TaskState, era: str | None, created: float,
             updated: float, result: dict[str, Any] | None, error: str | None, questions: list[str] | None = None,
             open_: list[str] | None = None, remembered: Mapping[str, Any] | None = None) -> TaskRow:
    """The tasks table's row of a call from its fields (`Call.stored_row`'s, and a plain call's that ended with no
    `Call` made: call/lean.py's `LeanCall.stored_row`): StoredTask's document, by alias and without nulls."""
    doc: dict[str, Any] = {"id": tid, "trace": trace, "parent": r.parent, "server": r.server,
                           "tool": r.tool, "session": r.session, "sessionSource": r.session_source,
                           "state": state, "era": era, "questions": list(questions or ()),
                           "open": list(open_ or ()), "created": rfc3339_epoch(created),
                           "updated": rfc3339_epoch(updated),
                           "result": result, "error": error, "arguments": r.arguments,
                           "cwd": r.cwd, "surface": r.surface, "policyMode": r.policy_mode}
    # without nulls: the fields that may be None taken out where they are, the rest keeping their places (rather
    # than a second dict of them all: this runs for every plain call's end, on the store's thread)
    if r.parent is None:
        del doc["parent"]
    if era is None:
        del doc["era"]
    if result is None:
        del doc["result"]
    if error is None:
        del doc["error"]
    if r.cwd is None:
        del doc["cwd"]
    if r.policy_mode is None:
        del doc["policyMode"]
    if r.transparent:
        transparent = {"era": r.era, "clientCaps": r.client_caps}
        doc["transparent"] = {k: v for k, v in transparent.items() if v is not None}
    if remembered is not None:
        doc["resume"] = dict(remembered)
    return TaskRow(tid, state, r.session, wirejson.encode(doc).decode())

Change = Literal["connected", "asked", "settled", "withdrawn", "slot", "slot-closed", "passed-over", "report",
                 "became-task", "progress", "running", "ended"]
# the changes that give a client following the call something new to act on (`Call.arrivals`): a question or a
# request for the client opened, a question passed over, the task the server made of it, its end; and those that take
# something away (`Call.departures`): a question settled or withdrawn, a request for the client closed. Neither counts
# its progress, era or report
ARRIVALS: frozenset[Change] = frozenset({"asked", "slot", "passed-over", "became-task", "ended"})
DEPARTURES: frozenset[Change] = frozenset({"settled", "withdrawn", "slot-closed"})


FirstAsker = Callable[[Elicitation], Awaitable[None]]


class Call:
    """One call of an upstream tool (`tsk-…`, the same id at every door and after a restart)."""

    def __init__(self, id: str, trace: str, request: CallRequest, *, state: TaskState = "running",
                 era: str | None = None, questions: list[str] | None = None,
                 remembered: Mapping[str, Any] | None = None, created: float | None = None,
                 kept: bool = False, result: dict[str, Any] | None = None, updated: float | None = None) -> None:
        self.id = id
        self.trace = trace
        self.request = request
        self._state: TaskState = state
        self._era = era
        self._questions: list[str] = list(questions or ())
        self._open: dict[str, Elicitation] = {}
        self._abandoned: list[str] = []
        self._keys: dict[str, str] = {}  # question id -> the upstream's own key for it (inputRequests)
        self._secrets: set[str] = set()  # credential values handed to the server: never stored
        self._slots: dict[str, Slot] = {}  # requests for the client itself, pending
        # open questions the calling client was given and could not answer (an unattended host's, one it refused):
        # they wait for other doors, and that client is not given them again
        self._passed_over: set[str] = set()
        self._result = result  # a call made once it ended (a plain call's on the lean path: call/lean.py)
        self._error: str | None = None
        self.created = created if created is not None else time.time()
        self._updated = updated if updated is not None else self.created
        # what the call's kind can continue it from after a restart (upstream/kind.py, `CallScope.remember`)
        self._remembered = dict(remembered) if remembered is not None else None
        self._upstream_task: str | None = (remembered or {}).get("task")
        self._progress: dict[str, Any] | None = None  # the server's last report (progress, total, message)
        self._end_reason: str | None = None
        self._end_state: TaskState = "cancelled"
        self._suspended = False
        self._kept = kept
        self._runner: asyncio.Task[None] | None = None
        self._begun = False  # its runner took its first step (a cancel before it would skip its whole body)
        self._halt_at_start = False  # ended from outside before its runner began: the runner cancels itself then
        self._lean: Callable[[], None] | None = None  # on the lean path (call/lean.py): any event promotes it
        self._first_asker: FirstAsker | None = None
        self._watches: list[Watch] = []
        self._arrivals = 0
        self._departures = 0

    # ---- what it is now (read-only)

    @property
    def arrivals(self) -> int:
        """How many times something opened for a follower to act on, or the call ended (ARRIVALS): a follower that saw
        this number has seen it all unless it grew (an int compared per wake, not the call's questions and requests
        rebuilt as sets)."""
        return self._arrivals

    @property
    def departures(self) -> int:
        """How many times a question or a request for the client stopped waiting (DEPARTURES): the same, for what a
        follower may have to withdraw."""
        return self._departures

    @property
    def state(self) -> TaskState:
        return self._state

    @property
    def done(self) -> bool:
        return self._state in DONE_STATES

    @property
    def era(self) -> str | None:
        return self._era

    @property
    def questions(self) -> tuple[str, ...]:
        """Every question the call raised, in order."""
        return tuple(self._questions)

    @property
    def open(self) -> Mapping[str, Elicitation]:
        """Its questions that wait for an answer."""
        return MappingProxyType(self._open)

    @property
    def abandoned(self) -> tuple[str, ...]:
        return tuple(self._abandoned)

    @property
    def keys(self) -> Mapping[str, str]:
        return MappingProxyType(self._keys)

    @property
    def slots(self) -> Mapping[str, Slot]:
        return MappingProxyType(self._slots)

    @property
    def passed_over(self) -> frozenset[str]:
        return frozenset(self._passed_over)

    @property
    def result(self) -> dict[str, Any] | None:
        return self._result

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def updated(self) -> float:
        return self._updated

    @property
    def progress(self) -> dict[str, Any] | None:
        return self._progress

    @property
    def remembered(self) -> Mapping[str, Any] | None:
        return self._remembered

    @property
    def upstream_task(self) -> str | None:
        """The server's own task the call became (its task handle), followed to its end."""
        return self._upstream_task

    @property
    def end_reason(self) -> str | None:
        """Why the call was ended from outside (failed or cancelled), once it was."""
        return self._end_reason

    @property
    def end_state(self) -> TaskState:
        return self._end_state

    @property
    def suspended(self) -> bool:
        """The daemon is stopping: the call stays as stored, for the next daemon to take up."""
        return self._suspended

    @property
    def kept(self) -> bool:
        """The store holds a row of it (it asked, or a restart found it): its end must follow soon."""
        return self._kept

    @property
    def runner(self) -> asyncio.Task[None] | None:
        return self._runner

    # ---- observers

    def watch(self) -> Watch:
        """A watch on the call's events, until it is closed (`with call.watch() as watch:`)."""
        watch = Watch(self)
        self._watches.append(watch)
        return watch

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """True once `predicate` holds, False if it still does not after `timeout` seconds."""
        if predicate():
            return True
        with self.watch() as watch:
            return await watch.until(predicate, timeout)

    def _tell(self, change: Change, subject: str | None = None) -> None:
        self._updated = time.time()
        if change in ARRIVALS:
            self._arrivals += 1
        elif change in DEPARTURES:
            self._departures += 1
        if self._lean is not None:
            self._lean()  # something happened to a lean call: it goes the full way from here (call/lean.py)
        # what changed (`change`, and the question, slot or task it concerns) is for whoever reads the call: a
        # watch's owner looks at the call itself once woken
        for watch in list(self._watches) if self._watches else ():
            watch.poke()

    # ---- asking the calling client first

    def first_asker(self, asker: FirstAsker | None) -> None:
        """Who asks the call's own client a question before its commit is queued (the driver of a client that can
        answer questions mid-call); None when that client is gone."""
        self._first_asker = asker

    async def ask_first(self, q: Elicitation) -> None:
        """The question opens (broker.open's `committing`): its own client, if one can be asked, is asked first, in
        this step; then it is the call's, and its watchers are told, so what they wake (the driver, a lean call's
        runner) runs after the question is written, not on its way. A lean call is promoted first (a question is its
        event): whoever follows it then is its first asker (call/lean.py's `settled`)."""
        if self._lean is not None:
            self._lean()
        if self._first_asker is not None:
            await self._first_asker(q)
        self.asked(q, pending=True)

    # ---- changes, each told

    def connected(self, era: str | None) -> None:
        self._era = era
        self._tell("connected")

    def started(self, runner: asyncio.Task[None]) -> None:
        self._runner = runner

    def begun(self) -> None:
        """Its runner's first step: a call ended from outside before it is cancelled now (at its first wait)."""
        self._begun = True
        if self._halt_at_start and self._runner is not None:
            self._runner.cancel()

    def lean(self, promote: Callable[[], None] | None) -> None:
        """The call is on the lean path (`promote` takes it to the full path, on its first event), or no longer."""
        self._lean = promote

    def halt(self) -> None:
        """Cancel its runner: at once once it has begun; else when it begins (a lean call is promoted for it)."""
        if self._runner is not None and self._begun:
            if not self._runner.done():
                self._runner.cancel()
            return
        self._halt_at_start = True
        if self._lean is not None:
            self._lean()

    def asked(self, q: Elicitation, pending: bool, tell: bool = True) -> None:
        """A question of the call's opened (`pending`: it waits for an answer; else settled at once). `tell`
        False: one of several opened together, told at once when the last is (`round_opened`)."""
        if q.id not in self._questions:
            self._questions.append(q.id)
        if pending:
            self._open[q.id] = q
            self._state = "input-required"
        if tell:
            self._tell("asked", q.id)

    def round_opened(self) -> None:
        """The questions and requests opened together (a modern server's round) are all open: told at once, so that
        nobody reads the round half open."""
        self._tell("asked")

    def raised(self, eid: str) -> None:
        """A question the call raised and no longer waits for (it opened as the call was ending)."""
        if eid not in self._questions:
            self._questions.append(eid)
        self._open.pop(eid, None)
        self._tell("settled", eid)

    def settled(self, eid: str) -> None:
        """A question no longer waits for the call (answered, or ended): the call runs on once none does."""
        self._open.pop(eid, None)
        if not self._open and self._state == "input-required":
            self._state = "running"
        self._tell("settled", eid)

    def withdrawn(self, eid: str) -> None:
        """A question that could not be stored: it was never the call's."""
        with contextlib.suppress(ValueError):
            self._questions.remove(eid)
        self._open.pop(eid, None)
        if not self._open and self._state == "input-required":
            self._state = "running"
        self._tell("withdrawn", eid)

    def abandoning(self, eid: str) -> None:
        """A question of the call's is abandoned as the call ends (it names it in the call's error)."""
        self._abandoned.append(eid)

    def keyed(self, eid: str, key: str) -> None:
        """The upstream's own key for question `eid` (a modern server's inputRequests key)."""
        self._keys[eid] = key

    def slot_opened(self, slot: Slot) -> None:
        self._slots[slot.key] = slot
        self._tell("slot", slot.key)

    def slot_closed(self, key: str) -> None:
        if self._slots.pop(key, None) is not None:
            self._tell("slot-closed", key)

    def pass_over(self, eid: str) -> None:
        """The calling client could not answer `eid`: it waits for other doors, and is not given to it again."""
        self._passed_over.add(eid)
        self._tell("passed-over", eid)

    def report_changed(self) -> None:
        """What a report of the call says changed though its state did not (a door's note on a refused answer)."""
        self._tell("report")

    def progressed(self, report: dict[str, Any]) -> None:
        self._progress = report
        self._tell("progress")

    def remember(self, state: Mapping[str, Any] | None) -> None:
        """What the call's kind can continue it from after a restart (stored with the next write of the call)."""
        self._remembered = dict(state) if state is not None else None

    def became_task(self, upstream_task: str) -> None:
        """The server made the call a task of its own: followed to its end."""
        self._upstream_task = upstream_task
        self._tell("became-task", upstream_task)

    def handed_secret(self, value: str) -> None:
        self._secrets.add(value)

    def keep(self) -> None:
        """The store holds a row of the call from now on."""
        self._kept = True

    def running(self, state: TaskState | None = None) -> None:
        """The call's state is `state` (running, or input-required while mcpx's own question waits)."""
        if state is not None:
            self._state = state
        self._tell("running")

    def fail(self, reason: str, state: TaskState = "failed") -> None:
        """End the call now: `failed` loudly (policy `error`, server removed) or `cancelled` (by the client)."""
        self._end_reason = reason
        self._end_state = state
        self.halt()

    def note_end_reason(self, reason: str) -> None:
        """Why the call is ending, said before it ends (its questions are abandoned with it)."""
        self._end_reason = reason

    def suspend(self) -> None:
        """The daemon is stopping: the call stays as stored; the next daemon takes it up."""
        self._suspended = True

    def ended(self, state: TaskState, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        """The call's end: its result, or its error (a result too, for a server's own protocol error); a credential
        the call handed its upstream and the upstream echoed is scrubbed here, so no door shows it either."""
        self._result = self.scrub(result)
        self._error = self.scrub(error)
        self._open.clear()
        self._remembered = None
        self._state = state
        self._tell("ended")

    # ---- as shown and stored

    def _shown(self) -> dict[str, Any]:
        r = self.request
        return {"id": self.id, "trace": self.trace, "parent": r.parent, "server": r.server, "tool": r.tool,
                "session": r.session, "session_source": r.session_source, "state": self._state, "era": self._era,
                "questions": list(self._questions), "open": list(self._open),
                "created": datetime.fromtimestamp(self.created, UTC),
                "updated": datetime.fromtimestamp(self._updated, UTC)}

    def doc(self) -> TaskDoc:
        return TaskDoc(**self._shown(), result=self._result, error=self._error,
                       progress=None if self.done else self._progress)

    def scrub(self, value: Any) -> Any:
        """`value` with every credential this call handed its server replaced by [redacted] (a server may echo it)."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            for secret in self._secrets:
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        return value

    def stored(self) -> StoredTask:
        """What the tasks table keeps: enough to answer for the call, and for its kind to continue it.

        What the server said or was given (its result, the error, the arguments, the client's
        capabilities) is kept without the credentials this call handed it.
        """
        # made, not validated: the values are the call's own, of their types already (a question's commit stores it
        # on the loop, while its host is asked); tests/unit/call/test_call_end.py holds it to the validated model
        return made(StoredTask, self._stored())

    def _stored(self) -> dict[str, Any]:
        r = self.request
        return {
            **self._shown(), "result": self._result, "error": self._error,  # scrubbed as the call ended
            "arguments": dict(self.scrub(r.arguments)), "cwd": r.cwd,
            "surface": r.surface, "policy_mode": r.policy_mode,
            "transparent": TransparentCall(era=r.era, client_caps=self.scrub(r.client_caps)) if r.transparent else None,
            "resume": dict(self._remembered) if self._remembered is not None else None}

    def stored_row(self) -> TaskRow:
        """`documents.task_row(self.stored())` without a model validated and encoded on the way: the row of a call
        that ended, written for every plain call (its values are the call's own, of their types already). The
        document is StoredTask's, by alias and without nulls, field for field (tests/unit/call/test_call_end.py
        holds the two to the same bytes)."""
        r = self.request
        if self._secrets:  # what the call keeps of what it was given, without the credentials it handed on
            r = dataclasses.replace(r, arguments=self.scrub(r.arguments), client_caps=self.scrub(r.client_caps))
        return task_row(self.id, self.trace, r, self._state, self._era, self.created, self._updated, self._result,
                        self._error, self._questions, list(self._open), self._remembered)

    def stored_with(self, q: Elicitation, pending: bool, remembered: Mapping[str, Any] | None = None) -> StoredTask:
        """What the tasks table keeps once `q` is open (pending, or settled at once), and with `remembered` what
        its kind continues from: stored in q's own commit."""
        stored = self._stored()  # its fields changed before it is made: one model made, not made and copied
        stored["questions"] = [*(e for e in stored["questions"] if e != q.id), q.id]
        if pending:
            stored["open"] = [*(e for e in stored["open"] if e != q.id), q.id]
            stored["state"] = "input-required"
        if remembered is not None:
            stored["resume"] = dict(remembered)
        return made(StoredTask, stored)


class Watch:
    """One observer's watch on a call: woken by the call's events, or by its owner (`poke`)."""

    def __init__(self, call: Call) -> None:
        self._call = call
        self._waiter: asyncio.Future[bool] | None = None
        # `until(told=True)`: the predicate it waits on, looked at as it is poked, so that what does not make it hold
        # wakes nobody (a wake is a step of the waiting task, every coroutine up its chain resumed)
        self._told: Callable[[], bool] | None = None
        self._hears: Callable[[], None] | None = None  # `hear`: its owner hears every poke in the poker's step

    def hear(self, heard: Callable[[], None] | None) -> None:
        """Call `heard` at each poke, in the step of whoever pokes (the call's events: in the step that changed it),
        and wake no waiter; None: wake the waiter again. For an owner that follows the call without a task of its own
        while nothing needs one (surface/plain_call.py); `heard` must not raise."""
        self._hears = heard

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        watches = self._call._watches
        if self in watches:  # not closed already (a list of one or two: no suppress() object built on every close)
            watches.remove(self)

    def poke(self) -> None:
        """Wake whoever waits on this watch (its owner has news of its own)."""
        if self._hears is not None:
            self._hears()
            return
        if self._waiter is not None and not self._waiter.done() and (self._told is None or self._told()):
            self._waiter.set_result(False)

    async def until(self, predicate: Callable[[], bool], timeout: float, told: bool = False) -> bool:
        """True once `predicate` holds (looked at on each wake), False if it still does not after `timeout`.
        `told`: the predicate is looked at as the watch is poked, in the step of whoever pokes it, and the waiter is
        woken only if it holds; for a predicate of what pokes the watch alone (the call's state, what its owner
        pokes it for), which must not raise."""
        if predicate():
            return True
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while True:
            waiter = self._waiter = loop.create_future()
            if told:
                self._told = predicate
            # the timeout wakes the waiter as an event does: a timer handle, not asyncio.timeout's cancel and
            # uncancel of the waiting task (every call's driver waits here once, for its reply)
            timer = loop.call_at(until, _expire, waiter)
            try:
                expired = await waiter
            finally:
                timer.cancel()
                self._waiter = self._told = None
            if predicate():
                return True
            if expired:
                return False


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(True)

