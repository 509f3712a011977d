"""What a running call offers the kind of upstream that runs it (upstream/kind.py's `CallScope`), and the questions
mcpx asks in its own name during a call: a confirmation before a call that may change things, a server's secrets,
a confirmation bound to one exact request.

A question of mcpx's own is one of the call's: open in it meanwhile (so whoever follows the call sees it), in the
call's session and trace, stored with the call in the question's own commit, and the person's alone.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcpx.broker.broker import Broker, Handle
from mcpx.broker.models import Answer, Answerer, Audience, Confirms, OpenRequest
from mcpx.broker.refusals import QuestionEnded
from mcpx.call.deadline import PausableDeadline
from mcpx.call.failures import CallError
from mcpx.call.questions import OwnQuestion, digest
from mcpx.call.record import Call
from mcpx.call.request import CallRequest
from mcpx.config.models import ServerConfig
from mcpx.config.source import ConfigSource

DIGEST = "digest"  # the field of a confirmation bound to one request: the request's digest, as shown


def method_of(exact: Mapping[str, Any]) -> str | None:
    """What an approval rule's `method` matches of a confirmed request: its HTTP method, or RUN for a command."""
    method = exact.get("method")
    return method.upper() if isinstance(method, str) else "RUN" if "argv" in exact else None


class CallRun:
    """One run of one call (its start, or its continuation after a restart), as its kind is handed it."""

    def __init__(self, broker: Broker, settings: ConfigSource, call: Call, entry: ServerConfig,
                 save: Callable[[Call], Awaitable[None]]) -> None:
        self.broker = broker
        self.settings = settings
        self.call = call
        self._entry = entry
        self._save = save
        self._deadline: PausableDeadline | None = None  # made when asked for: a plain call's kind keeps its own

    # ---- CallScope

    @property
    def id(self) -> str:
        return self.call.id

    @property
    def request(self) -> CallRequest:
        return self.call.request

    @property
    def entry(self) -> ServerConfig:
        return self._entry

    @property
    def deadline(self) -> PausableDeadline:
        if self._deadline is None:
            self._deadline = PausableDeadline(self._entry.timeout)
        return self._deadline

    async def save(self) -> None:
        """The call as it stands, stored now."""
        await self._save(self.call)

    async def ask(self, question: OwnQuestion) -> Answer:
        r = self.request
        about = question.about or f"{r.server}.{r.tool}"
        handle = await self.broker.open(self.own_request(about, question.message, question.requested_schema,
                                                         ttl=question.ttl, audience=question.audience,
                                                         url=question.url), self.call.stored_with)
        return await self.own_answer(handle, "mcpx's question")

    async def confirm(self, summary: str, exact: Mapping[str, Any]) -> None:
        r = self.request
        shown = json.dumps(exact, ensure_ascii=False, indent=2, sort_keys=True)
        bound = digest(exact)
        handle = await self.broker.open(self.own_request(
            f"{r.server}.{r.tool}", f"{summary}\n\n{shown}\n\nLet mcpx send exactly this?",
            {"type": "object", "properties": {
                "confirm": {"type": "boolean", "default": False, "title": "Send exactly this request"},
                DIGEST: {"type": "string", "enum": [bound], "default": bound, "title": "Request digest (sha256)"}},
             "required": ["confirm", DIGEST]}, confirms=Confirms(server=r.server, tool=r.tool, method=method_of(exact),
                                                                request=bound)), self.call.stored_with)
        answer = await self.own_answer(handle, "mcpx's confirmation")
        content = answer.content or {}
        if answer.action == "accept" and content.get("confirm") is True and content.get(DIGEST) == bound:
            return
        raise CallError(f"{r.server}.{r.tool} was not run: mcpx asked first ({handle.id}) and "
                         f"{self.why_not(answer)}")

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        report: dict[str, Any] = {"progress": progress}
        if total is not None:
            report["total"] = total
        if message is not None:
            report["message"] = message
        self.call.progressed(report)
        token = (self.request.meta or {}).get("progressToken")
        if token is not None and self.request.relay is not None:
            await self.request.relay("notifications/progress", {"progressToken": token, **report})

    def secret(self, value: str) -> None:
        self.call.handed_secret(value)

    async def remember(self, state: Mapping[str, Any]) -> None:
        self.call.remember(state)
        await self.save()

    # ---- mcpx's own questions

    def own_request(self, tool: str, message: str, schema: dict[str, Any], *, ttl: float | None = None,
                    audience: Audience = "human", url: str | None = None, confirms: Confirms | None = None
                    ) -> OpenRequest:
        """A question mcpx asks on its own behalf during the call: the person's, the call's session and trace."""
        r = self.request
        return OpenRequest(session=r.session, session_source=r.session_source, server="mcpx", tool=tool,
                           message=message, requested_schema=None if url else schema,
                           mode="url" if url else "form", url=url, trace=self.call.trace, parent=r.parent,
                           task=self.call.id, ttl=ttl if ttl is not None else self.settings.config.elicit.ask_timeout,
                           audience=audience, policy_mode=r.policy_mode, confirms=confirms)

    async def own_answer(self, handle: Handle, what: str, waiting: Awaitable[Answer] | None = None) -> Answer:
        """Wait, as the call, on a question of mcpx's own: open in the call meanwhile, then the answer (`waiting`,
        or the handle's); the call's deadline stands still; CallError when it ended unanswered."""
        r = self.request
        self.call.keep()
        if handle.done():
            self.call.raised(handle.id)
        else:
            self.call.asked(handle.elicitation, pending=True)
        self.deadline.pause()
        try:
            return await (waiting if waiting is not None else handle.answer())
        except QuestionEnded as ended:
            raise CallError(f"{r.server}.{r.tool} was not run: {what} {handle.id} ended without an answer "
                             f"({ended.reason})") from None
        finally:
            self.deadline.resume()
            self.call.settled(handle.id)
            self.call.running("running")

    def why_not(self, answer: Answer) -> str:
        """Why mcpx's own question did not let a call go on, in the words of who answered it."""
        if Answerer.kind_of(answer.by) == "expiry":
            return f"nobody answered within {self.settings.config.elicit.ask_timeout:g}s"
        if answer.action == "accept":
            return f"{answer.by} answered but did not confirm"
        return f"{answer.by} said {answer.action}" + (f" ({answer.reason})" if answer.reason else "")

    async def confirm_destructive(self, why: str) -> None:
        """mcpx asks the person on its own behalf before a call to an MCP server's tool that may change or delete
        things (`why` says how it knows: the server's hints, or its entry's `confirm`)."""
        r = self.request
        called = {"server": r.server, "tool": r.tool, "arguments": r.arguments}
        handle = await self.broker.open(self.own_request(
            f"{r.server}.{r.tool}", f"{r.server}.{r.tool} {why}: let this call proceed?",
            {"type": "object", "properties": {"confirm": {
                "type": "boolean", "default": False, "title": "Let it proceed",
                "description": f"arguments: {json.dumps(r.arguments, ensure_ascii=False)[:500]}"}}},
            confirms=Confirms(server=r.server, tool=r.tool, request=digest(called))), self.call.stored_with)
        answer = await self.own_answer(handle, "mcpx's confirmation")
        if answer.action == "accept" and (answer.content or {}).get("confirm") is True:
            return
        raise CallError(f"{r.server}.{r.tool} was not run: mcpx asked first ({handle.id}) and "
                         f"{self.why_not(answer)}")
