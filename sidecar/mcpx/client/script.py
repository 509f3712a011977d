"""`mcpx.Client` and `mcpx.connect()`: a script's calls through this MCPX_HOME's daemon, and its own answers to the
questions they raise (docs/scripts.md).

The handler is registered rather than passed per call (the design record, §5.2): a question arrives from inside a
call the script did not know would ask. Every question of a call the client makes is handed to it while the call
waits; its answers go through the daemon's answer route like anyone's, as `script:<name>`, and are held to the same
rules (broker/rules.py: a script may refuse the person's own question for them, never accept it). Without a
handler the call is made with `elicit: auto`: the config's rules, then cancel. Nothing here waits on a question
nobody will answer: when the script gives up (an exception, a refused answer), the call it made is cancelled.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias

from mcpx.broker.models import SCRIPT_NAME, Answerer
from mcpx.broker.schema import FlatSchema
from mcpx.client.daemon_client import DaemonClient
from mcpx.client.prompt import TerminalForm, read_answer
from mcpx.client.question_watch import EndedMeanwhile as EndedMeanwhile  # mcpx.EndedMeanwhile, for a script
from mcpx.client.question_watch import QuestionWatch
from mcpx.client.target import split_target
from mcpx.client.transport import ApiError, ApiResponse
from mcpx.daemon.launch import ensure_daemon
from mcpx.shared.errors import McpxError
from mcpx.system.paths import StatePaths

if TYPE_CHECKING:
    from mcpx.client.replies import AnswerDoc, QuestionDoc

log = logging.getLogger("mcpx.client")

# how long one long poll of the call's result lasts: the daemon ends it at once when a question opens that the
# client was not handed already
POLL = 30.0


@dataclass(frozen=True)
class Accept:
    """Accept the question with this content (a url-mode question: none)."""

    content: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decline:
    """Refuse the question, saying why."""

    reason: str | None = None


@dataclass(frozen=True)
class Cancel:
    """Neither: the server goes on without an answer."""

    reason: str | None = None


Reply: TypeAlias = Accept | Decline | Cancel
# a handler answers, or returns None to leave the question to whoever else may answer it (the person, its expiry)
Handler: TypeAlias = Callable[["Question"], "Reply | Awaitable[Reply | None] | None"]


@dataclass(frozen=True)
class Question:
    """A question a call raised, as the daemon shows it."""

    id: str
    server: str
    tool: str | None
    mode: str
    message: str  # the server's words: data, never an instruction
    audience: str
    reason: str
    schema: dict[str, Any] | None
    url: str | None
    task: str | None
    document: QuestionDoc = field(repr=False)

    @property
    def fields(self) -> tuple[str, ...]:
        """The names of the fields it asks for (none in url mode)."""
        return tuple(f.name for f in FlatSchema.of(self.schema).fields)

    @classmethod
    def of(cls, doc: QuestionDoc) -> Question:
        return cls(id=doc["id"], server=doc["server"], tool=doc.get("tool"), mode=doc["mode"], message=doc["message"],
                   audience=doc["audience"], reason=doc.get("reason", ""), schema=doc.get("requestedSchema"),
                   url=doc.get("url"), task=doc.get("task"), document=doc)


class AnswerRefused(McpxError):
    """The daemon refused the script's answer; `fields`: each field's problem (a content that does not fit)."""

    def __init__(self, question: Question, error: ApiError) -> None:
        self.question = question
        self.status = error.status
        self.fields = dict(error.fields)
        named = "; ".join(f"{name}: {problem}" for name, problem in self.fields.items())
        super().__init__(f"the answer to {question.id} ({question.server}.{question.tool}) was refused: "
                         f"{named or error}")


class CallFailed(McpxError):
    """The call ended without a result: it failed or was cancelled (the message says why)."""


def default_name() -> str:
    """The running script's file stem (`deploy` for deploy.py), made a name `script:` takes; `python` when there is
    no script file (an interactive session, `python -c`)."""
    stem = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).lstrip("._-")[:64]
    return name if SCRIPT_NAME.fullmatch(name) else "python"


class Client:
    """A script's way through this MCPX_HOME's daemon (started, as `mcpx serve` starts one, if none runs)."""

    def __init__(self, name: str | None = None, *, session: str | None = None, paths: StatePaths | None = None,
                 start: bool = True) -> None:
        self.name = name if name is not None else default_name()
        self.answerer = str(Answerer.script(self.name))  # ValueError at once for a name that is none
        self.session = session
        self.paths = paths or StatePaths.current()
        self._start = start and not os.environ.get("MCPX_DAEMON_URL")
        self._handler: Handler | None = None
        self._daemon: DaemonClient | None = None

    def on_elicit(self, handler: Handler) -> Handler:
        """Register the handler every question of this client's calls is handed to (a decorator, or a call)."""
        self._handler = handler
        return handler

    async def __aenter__(self) -> Client:
        if self._start:
            await asyncio.to_thread(ensure_daemon, self.paths, what=f"mcpx.Client ({self.answerer})")
        self._daemon = DaemonClient(self.paths, answerer=self.answerer)
        await self._daemon.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._daemon is not None:
            await self._daemon.__aexit__()
            self._daemon = None

    @property
    def daemon(self) -> DaemonClient:
        if self._daemon is None:
            raise McpxError("use the client inside `async with mcpx.Client() as client:`")
        return self._daemon

    async def call(self, target: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call SERVER.TOOL with `arguments`; its CallToolResult as a dict, once the call ends. Its questions are
        handed to the handler meanwhile. CallFailed if the call fails; whatever the handler raises (AnswerRefused
        for an answer the daemon refused) ends the call, cancelled, and is raised here."""
        server, tool = split_target(target)
        body: dict[str, Any] = {"arguments": dict(arguments or {})}
        if self.session:
            body["session"] = self.session
        if self._handler is None:
            body["elicit"] = "auto"  # the config's rules, then cancel: never a question nobody here will answer
        resp = await self.daemon.request("POST", f"/v1/call/{server}/{tool}", json_body=body, timeout=3700,
                                         ok=(502,))
        task: str | None = None
        try:
            handed: set[str] = set()  # each question is handed over once, however long it then waits
            while resp.status == 202:
                task = resp.body["task"]
                waiting = resp.body.get("elicitations") or []
                for doc in waiting:
                    if doc["id"] not in handed:
                        handed.add(doc["id"])
                        await self._hand_over(Question.of(doc))
                # those still waiting (left to the person, say) are no news: only the result or a new question is
                resp = await self._result(task, handed & {doc["id"] for doc in waiting})
            return self._ended(resp)
        except BaseException:
            if task is not None:
                await self._cancel(task)
            raise

    async def _result(self, task: str, known: set[str]) -> ApiResponse:
        """The call's result, or its questions as soon as one waits that is not among those `known`."""
        # the daemon takes 23 (call_routes.KNOWN_MAX): a call that leaves more to others is no call a script makes
        params = {"timeout": POLL, "wake": "question", "known": ",".join(sorted(known)[:23]) or None}
        return await self.daemon.request("GET", f"/v1/tasks/{task}/result", params=params, timeout=POLL + 30)

    @staticmethod
    def _ended(resp: ApiResponse) -> dict[str, Any]:
        body = resp.body
        if resp.status == 502:
            raise CallFailed(body["error"]["message"])
        if "state" in body and body["state"] != "completed":  # a task's document: failed or cancelled
            raise CallFailed(f"{body['server']}.{body['tool']} {body['state']}: {body.get('error') or body['state']}")
        result: dict[str, Any] = body.get("result") or {}
        return result

    async def _cancel(self, task: str) -> None:
        try:
            await self.daemon.post(f"/v1/tasks/{task}/cancel")
        except ApiError as exc:
            if exc.status != 409:  # 409: it ended meanwhile
                log.warning("mcpx: could not cancel %s: %s", task, exc)

    async def _hand_over(self, q: Question) -> None:
        """The handler's answer to `q`, given. Or none: the handler left it to the others, or it was the person's to
        accept (the refusal is logged; it waits for them)."""
        # without a handler the policy met every question as it opened (elicit auto); one that still comes is
        # cancelled here rather than left to a wait nobody will end
        reply = self._handler(q) if self._handler is not None else Cancel("the script registered no handler")
        if inspect.isawaitable(reply):
            reply = await reply
        if reply is None:
            return
        if not isinstance(reply, Accept | Decline | Cancel):
            raise TypeError(f"the handler answered {q.id} with {reply!r}: return mcpx.Accept, mcpx.Decline, "
                            "mcpx.Cancel or None")
        if isinstance(reply, Accept):
            action, content, reason = "accept", (reply.content if q.mode == "form" else None), None
        else:
            action, content, reason = "decline" if isinstance(reply, Decline) else "cancel", None, reply.reason
        try:
            await self.daemon.answer(q.id, action, content, reason)
        except ApiError as exc:
            if exc.status == 422:
                raise AnswerRefused(q, exc) from None
            if exc.status == 403 and q.audience == "human":
                log.warning("mcpx: %s", exc)  # it waits for the person, as the refusal says
            elif exc.status not in (409, 410):  # 409, 410: answered by someone else first, or ended: no matter
                raise

    async def ask(self, q: Question) -> AnswerDoc:
        """Put `q` to the person at this terminal, field by field, until they answer; recorded as theirs
        (`person:cli`). The answer as stored. The prompt blocks this client while the person types.

        The question is watched meanwhile: once it ends elsewhere the prompt stops at once and says how. Answered
        from another door, or expired, that answer (as stored) is returned; abandoned (its call ended, say),
        EndedMeanwhile is raised, saying so."""
        if not sys.stdin.isatty():
            raise McpxError(f"client.ask({q.id}) needs a terminal to ask the person at; there is none (stdin is not "
                            "one). They can answer it in the inbox (mcpx inbox) or with mcpx tui.")
        content: dict[str, Any] = {}
        problems: dict[str, str] | None = None
        with QuestionWatch(q.id, self.paths) as watch:
            form = TerminalForm.until(watch)
            async with DaemonClient(self.paths) as person:  # the person's own identity: person:cli (agent:cli in
                while True:                                  # an agent's shell, which the daemon holds to)
                    try:
                        action, given, reason = read_answer(form, q.document, content, problems)
                    except EndedMeanwhile:
                        return _ended_elsewhere(form, watch)
                    content = given or content
                    try:
                        answered = await person.answer(q.id, action, given, reason)
                    except ApiError as exc:
                        if exc.status == 422 and exc.fields:
                            problems = exc.fields
                            continue
                        # too late: it ended as the person answered, and the watch sees how in a moment
                        if exc.status in (409, 410) and await asyncio.to_thread(watch.wait, POLL):
                            return _ended_elsewhere(form, watch)
                        raise
                    found = answered.get("answer")
                    doc: AnswerDoc = found if found else {}
                    return doc


def _ended_elsewhere(form: TerminalForm, watch: QuestionWatch) -> AnswerDoc:
    """Said at the terminal: how the question being asked ended elsewhere. The answer it ended with; an abandoned
    question, which has none, is raised (EndedMeanwhile)."""
    ended = watch.ended()
    form.say(f"  ({ended})")
    if watch.answer is None:
        raise ended
    return watch.answer


class BlockingClient:
    """`mcpx.connect()`: the client's methods for a plain script, each returning when done. The handler may be a
    plain function."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._runner = asyncio.Runner()
        try:
            self._runner.run(client.__aenter__())
        except BaseException:  # no daemon, say: nothing is left open behind the error
            self._runner.close()
            raise

    def on_elicit(self, handler: Handler) -> Handler:
        return self.client.on_elicit(handler)

    def call(self, target: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._runner.run(self.client.call(target, arguments))

    def ask(self, q: Question) -> AnswerDoc:
        return self._runner.run(self.client.ask(q))

    def close(self) -> None:
        try:
            self._runner.run(self.client.__aexit__())
        finally:
            self._runner.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def connect(name: str | None = None, *, session: str | None = None, paths: StatePaths | None = None,
            start: bool = True) -> BlockingClient:
    """A blocking client, connected (the daemon started if none runs); `with mcpx.connect() as client:` closes it."""
    return BlockingClient(Client(name, session=session, paths=paths, start=start))
