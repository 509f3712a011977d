"""The daemon's gateway to its upstream servers: tools, calls as tasks, and calls that outlive a restart.

A modern-era call waiting for answers is durable: its questions, the pending requestState and
its arguments are in the store, so after a kill -9 the new daemon re-attaches to the questions
and, once they are answered, sends the retry that was due. A call the server made a task is
stored with the task's id, and the new daemon follows the task again: its open questions are
the same ones, and its result is the call's. A legacy call cannot survive its server process;
its questions are abandoned with the reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

from mcpx.broker.broker import Broker, Handle
from mcpx.broker.errors import QuestionEnded
from mcpx.broker.models import Answer, Answerer, Confirms, OpenRequest, SessionSource, TaskDoc, TaskState
from mcpx.broker.store import QuestionFilter
from mcpx.config import CommandsServer, HttpServer, OpenApiServer, ServerConfig, StdioServer
from mcpx.configsource import ConfigSource
from mcpx.errors import McpxError
from mcpx.ids import is_id, new_id
from mcpx.mcp.input_required import RoundsError
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.peer import PeerClosed
from mcpx.mcp.protocol import Era
from mcpx.mcp.tasks import TaskError, TaskGone
from mcpx.services.document import DocumentError
from mcpx.services.kinds import confirmed_name, service_kinds
from mcpx.upstream import secrets
from mcpx.upstream.calls import CallContext, CallFailed, CallRequest, CallTask, elicit_result, usable
from mcpx.upstream.connection import NeedsLegacy
from mcpx.upstream.deadline import CallTimeout, PausableDeadline
from mcpx.upstream.errors import UpstreamError
from mcpx.upstream.kind import Kinds, Question, UpstreamKind, digest
from mcpx.upstream.kind_scope import KindScope
from mcpx.upstream.pool import Pool, UnknownServer, entry_fingerprint
from mcpx.upstream.resume import Resume

log = logging.getLogger("mcpx.upstream")

# finished calls kept in memory for mcpx_task_result and /v1/tasks; older ones are read from mcpx.db
KEEP_FINISHED = 256

__all__ = ["CallRequest", "CallTask", "Gateway", "UnknownServer", "UnknownTask"]


class UnknownTask(McpxError):
    pass


class Gateway:
    def __init__(self, broker: Broker, config: ConfigSource) -> None:
        self.broker = broker
        self.settings = config  # read at each use: a reload replaces the config whole
        self.pool = Pool(lambda: self.settings.config.mcp_servers, self._recall_era, self._remember_era,
                         self._tools_changed)
        # the kinds of upstream beside MCP servers: REST services and commands (mcpx/services/)
        self.kinds = Kinds(service_kinds(self, self._config_dir))
        self.tasks: dict[str, CallTask] = {}  # running calls, and the most recent finished ones
        self._finished: deque[str] = deque()
        self._tool_cache: dict[str, list[dict[str, Any]]] = {}
        self.tool_listeners: list[Any] = []  # callables notified when a server's tools change
        self.secrets = secrets.SecretAsker(broker, config, self._tools_changed)
        self._refused_secrets: set[str] = set()  # servers whose secrets the person would not give: listings stop asking
        self._listing_waits: set[asyncio.Task[None]] = set()  # a listing's question for secrets, waited on
        self._reaper: asyncio.Task[None] | None = None

    # ---- lifecycle

    async def start(self) -> None:
        self.pool.start()
        await self._recover()
        lease = self.broker.store_info.lease
        if lease is None:
            await self.secrets.abandon_orphans()
        else:
            self._reaper = asyncio.create_task(self._reap_lapsed(lease), name="mcpx-reap-lapsed")

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        for task in list(self.tasks.values()):
            if task.done:
                continue
            if task.era == "modern" and task.resume:
                task.suspended = True  # left as stored; the next daemon re-attaches and re-drives it
            else:
                task.fail("the mcpx daemon stopped during the call", "failed")
        runners = [t.runner for t in self.tasks.values() if t.runner is not None and not t.runner.done()]
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        for waiting in list(self._listing_waits):
            waiting.cancel()
        await asyncio.gather(*self._listing_waits, return_exceptions=True)
        await self.secrets.close()
        await self.kinds.each(lambda kind: kind.stop())
        await self.pool.close()

    async def reconfigure(self) -> None:
        servers = self.settings.config.servers
        for task in self.tasks.values():
            if not task.done and task.request.server not in servers:
                task.fail(f"server {task.request.server!r} was removed from the config during the call", "failed")
        self._tool_cache = {k: v for k, v in self._tool_cache.items() if k in servers}
        await self.pool.reconfigure()
        await self.kinds.each(lambda kind: kind.reconfigure())
        for server in servers:
            self._tool_cache.pop(server, None)
        await self._announce()

    # ---- era memory (probed once per server and kept across restarts)

    async def _recall_era(self, server: str, fingerprint: str) -> Era | None:
        value = await self.broker.fact(f"era:{server}:{fingerprint}")
        return value if value in ("legacy", "modern") else None

    async def _remember_era(self, server: str, fingerprint: str, era: Era) -> None:
        await self.broker.set_fact(f"era:{server}:{fingerprint}", era)

    # ---- tools

    async def _tools_changed(self, server: str) -> None:
        self._tool_cache.pop(server, None)
        await self._announce()

    async def _announce(self) -> None:
        for listener in list(self.tool_listeners):
            try:
                listener()
            except Exception:  # one listener's trouble is not the reload's, nor the other listeners'
                log.exception("a listener to the tool list failed")

    def entry(self, server: str) -> ServerConfig:
        """The config's entry for `server`, of any kind; UnknownServer naming the known ones."""
        entry = self.settings.config.servers.get(server)
        if entry is None:
            known = ", ".join(sorted(self.settings.config.servers)) or "none are configured"
            raise UnknownServer(f"no server {server!r} behind mcpx ({known})")
        return entry

    # ---- the kinds' host (upstream/kind.py's UpstreamHost)

    def entries(self) -> dict[str, ServerConfig]:
        return self.settings.config.servers

    async def tools_changed(self, server: str) -> None:
        await self._tools_changed(server)

    def _config_dir(self) -> Path:
        """Where a relative path in an entry is read from: the config file's directory (the nearest file's when
        several make the config)."""
        loaded = self.settings.loaded
        return loaded.sources[-1].parent if loaded.sources else loaded.cwd

    def proxied(self, server: str) -> None:
        """UnknownServer unless `server` is an MCP server, which /mcp/SERVER passes through to as it is."""
        if (kind := self.service(server)) is not None:
            raise UnknownServer(f"server {server!r} is {'an OpenAPI service' if kind.name == 'openapi' else 'commands'}"
                                f", not an MCP server: its tools are served on /mcp as {server}_TOOL, not on "
                                f"/mcp/{server}")
        self.pool.entry(server)

    def service(self, server: str) -> UpstreamKind | None:
        """The kind of a service entry (an OpenAPI document, commands); None for an MCP server."""
        entry = self.settings.config.servers.get(server)
        return self.kinds.of(entry) if isinstance(entry, (OpenApiServer, CommandsServer)) else None

    async def tools(self, server: str, asker: tuple[str, SessionSource] | None = None) -> list[dict[str, Any]]:
        """The server's tools (listed once, then from memory). `asker`: the session a question this listing opens
        belongs to (a server's missing secrets); by default the config's."""
        if (kind := self.service(server)) is not None:
            try:
                return await kind.tools(server)
            except DocumentError as exc:
                raise UpstreamError(f"server {server!r}: {exc}") from None
        entry = self.pool.entry(server)
        if server not in self._tool_cache:
            if secrets.names(entry):
                await self._secrets_listed(server, entry, asker or (self.settings.fallback_session(), "fallback"))
            async with self.pool.lease(server, "*") as conn:
                self._tool_cache[server] = await conn.list_tools(refresh=True)
        return self._tool_cache[server]

    async def _secrets_listed(self, server: str, entry: ServerConfig, asker: tuple[str, SessionSource]) -> None:
        """A listing never waits for a person: with a secret missing it asks for it (once, not again after a refusal)
        and fails at once naming the question; once answered the server's tools are listed again."""
        if server in self._refused_secrets:
            if lacking := await self.secrets.lacking(server, entry):
                raise secrets.MissingSecrets(f"server {server!r} was not started: its secrets {', '.join(lacking)} "
                                             f"were asked for and not given (run `mcpx secrets set {server} "
                                             f"{lacking[0]}`, or call one of its tools to be asked again)")
            self._refused_secrets.discard(server)
            return
        handle = await self.secrets.asking(server, entry, OpenRequest(
            session=asker[0], session_source=asker[1], server="mcpx", message="-"))
        if handle is None:
            return
        task = asyncio.create_task(self._listed_answer(server, handle), name=f"mcpx-secrets-listed-{server}")
        self._listing_waits.add(task)
        task.add_done_callback(self._listing_waits.discard)
        raise secrets.MissingSecrets(f"server {server!r} waits for its secrets: mcpx asked for them in {handle.id} "
                                     f"(answer it in the inbox or with `mcpx elicit answer {handle.id}`, or run "
                                     f"`mcpx secrets set {server} NAME`)")

    async def _listed_answer(self, server: str, handle: Handle) -> None:
        try:
            answer = await self.secrets.settled(server, handle)
        except QuestionEnded:
            return
        if answer.action != "accept":
            self._refused_secrets.add(server)

    async def all_tools(self) -> dict[str, list[dict[str, Any]] | str]:
        """Every server's tools, or the error that stopped listing them (one bad server hides no other)."""
        out: dict[str, list[dict[str, Any]] | str] = {}

        async def one(server: str) -> None:
            try:
                out[server] = await self.tools(server)
            except (UpstreamError, RpcError, PeerClosed, TimeoutError) as exc:
                out[server] = str(exc)
            except Exception as exc:  # whatever else one server's trouble is, the others are still listed
                log.exception("listing %s's tools failed", server)
                out[server] = f"listing its tools failed: {exc!r}"

        await asyncio.gather(*(one(s) for s in sorted(self.settings.config.servers)))
        return dict(sorted(out.items()))

    async def tool(self, server: str, name: str) -> dict[str, Any] | None:
        for t in await self.tools(server):
            if t.get("name") == name:
                return t
        return None

    # ---- calls

    async def _save(self, task: CallTask) -> None:
        task.kept = True
        await self.broker.save_task(task.stored())

    def task(self, tid: str) -> CallTask | None:
        return self.tasks.get(tid)

    async def task_doc(self, tid: str) -> TaskDoc:
        if not is_id(tid, "tsk"):
            raise UnknownTask(f"{tid!r} is not a task id (they look like tsk- and 16 hex digits)")
        live = self.tasks.get(tid)
        if live is not None:
            return live.doc()
        stored = await self.broker.task(tid)
        if stored is None:
            raise UnknownTask(f"no task {tid}")
        return stored.shown()

    async def start_call(self, request: CallRequest) -> CallTask:
        self.entry(request.server)  # an unknown server is refused before anything is recorded
        task = CallTask(id=new_id("tsk"), trace=new_id("cal"), request=request)
        # kept in memory until there is something to keep: the first question (which a restart must know of),
        # or the end. A call that just runs and answers costs the store one write.
        self.tasks[task.id] = task
        task.runner = asyncio.create_task(self._run(task), name=f"mcpx-call-{task.id}")
        return task

    async def _run(self, task: CallTask) -> None:
        if (kind := self.service(task.request.server)) is not None:
            await self._run_to_end(task, self._kind_call(task, kind), "running")
            return
        entry = self.pool.entry(task.request.server)
        assert isinstance(entry, (StdioServer, HttpServer))  # the pool holds MCP servers alone
        await self._run_to_end(task, self._confirmed_call(task, entry.timeout, entry.confirm), "running")

    async def _kind_call(self, task: CallTask, kind: UpstreamKind) -> dict[str, Any]:
        await self._secrets_for(task)  # in the keychain before the kind is asked for anything (upstream/kind.py)
        return await kind.call(KindScope(task, self.entry(task.request.server), self._kind_asks, self._confirm_exact))

    async def _confirmed_call(self, task: CallTask, timeout: float, confirm: list[str]) -> dict[str, Any]:
        r = task.request
        await self._secrets_for(task)
        if confirmed_name(r.tool, confirm):
            await self._confirm_tool(task, "is one its server's confirm names")
        elif self.settings.config.elicit.confirm_destructive and await self._may_change_things(task):
            await self._confirm_tool(task, "may change or delete things")
        return await self._call_with_era(task, timeout, era=None)

    async def _may_change_things(self, task: CallTask) -> bool:
        """A tool changes things unless its server says otherwise (readOnlyHint, or destructiveHint false)."""
        try:
            tool = await self.tool(task.request.server, task.request.tool)
        except (UpstreamError, RpcError, PeerClosed, TimeoutError):
            tool = None
        ann = (tool or {}).get("annotations") or {}
        return not (ann.get("readOnlyHint") is True or ann.get("destructiveHint") is False)

    def _own_request(self, task: CallTask, tool: str, message: str, schema: dict[str, Any],
                     confirms: Confirms | None = None) -> OpenRequest:
        """A question mcpx asks on its own behalf during `task`: the person's, the call's session and trace."""
        r = task.request
        return OpenRequest(session=r.session, session_source=r.session_source, server="mcpx", tool=tool,
                           message=message, requested_schema=schema, trace=task.trace, parent=r.parent, task=task.id,
                           ttl=self.settings.config.elicit.ask_timeout, audience="human", policy_mode=r.policy_mode,
                           confirms=confirms)

    async def _own_answer(self, task: CallTask, handle: Handle, what: str,
                          waiting: Awaitable[Answer] | None = None) -> Answer:
        """Wait, as the call, on a question of mcpx's own: open in the call's task meanwhile (so whoever follows the
        call sees it), then the answer (`waiting`, or the handle's); CallFailed when it ended unanswered."""
        r = task.request
        task.kept = True
        if handle.id not in task.questions:
            task.questions.append(handle.id)
        if not handle.done():
            task.open[handle.id] = handle.elicitation
            task.state = "input-required"
        await task.touch()
        try:
            return await (waiting if waiting is not None else handle.answer())
        except QuestionEnded as ended:
            raise CallFailed(f"{r.server}.{r.tool} was not run: {what} {handle.id} ended without an answer "
                             f"({ended.reason})") from None
        finally:
            task.open.pop(handle.id, None)
            task.state = "running"
            await task.touch()

    def _why_not(self, answer: Answer) -> str:
        """Why mcpx's own question did not let a call go on, in the words of who answered it."""
        if Answerer.kind_of(answer.by) == "expiry":
            return f"nobody answered within {self.settings.config.elicit.ask_timeout:g}s"
        if answer.action == "accept":
            return f"{answer.by} answered but did not confirm"
        return f"{answer.by} said {answer.action}" + (f" ({answer.reason})" if answer.reason else "")

    async def _confirm_tool(self, task: CallTask, why: str) -> None:
        """mcpx asks the person before it forwards a call to an MCP server's tool that may change or delete things
        (`why` says how it knows), bound to the tool and its arguments."""
        r = task.request
        await self._confirm(task, f"{r.server}.{r.tool} {why}: let this call proceed?",
                            f"arguments: {json.dumps(r.arguments, ensure_ascii=False)[:500]}",
                            {"server": r.server, "tool": r.tool, "arguments": r.arguments},
                            f"{r.server}.{r.tool} was not run")

    async def _confirm_exact(self, task: CallTask, summary: str, exact: Mapping[str, Any]) -> None:
        """A kind's confirmation of one exact request (upstream/kind.py: CallScope.confirm), shown verbatim."""
        await self._confirm(task, f"{summary}:\n\n{json.dumps(exact, indent=2, ensure_ascii=False)}",
                            f"exactly this request, once (sha256 {digest(exact)[:16]}…)", exact,
                            f"{task.request.server}.{task.request.tool}: nothing was sent")

    async def _confirm(self, task: CallTask, message: str, detail: str, exact: Mapping[str, Any], failed: str) -> None:
        """mcpx asks the person on its own behalf before a call goes out; CallFailed unless they (or the approvers
        an approval rule names) accepted. The question carries the digest of exactly what goes (`Confirms`), which
        approval rules match by the call's server, tool and method (an HTTP method; RUN for a command's argv)."""
        r = task.request
        method = exact.get("method") if isinstance(exact.get("method"), str) else "RUN" if "argv" in exact else None
        handle = await self.broker.open(self._own_request(
            task, f"{r.server}.{r.tool}", message, {"type": "object", "properties": {"confirm": {
                "type": "boolean", "default": False, "title": "Let it proceed", "description": detail}}},
            Confirms(server=r.server, tool=r.tool, method=method, request=digest(exact))), task.stored_with)
        answer = await self._own_answer(task, handle, "mcpx's confirmation")
        if answer.action == "accept" and (answer.content or {}).get("confirm") is True:
            return
        raise CallFailed(f"{failed}: mcpx asked first ({handle.id}) and {self._why_not(answer)}")

    async def _kind_asks(self, task: CallTask, question: Question) -> Answer:
        """A kind's own question in a call (upstream/kind.py: CallScope.ask)."""
        r = task.request
        request = self._own_request(task, question.about or f"{r.server}.{r.tool}", question.message,
                                    question.requested_schema)
        if question.url is not None:
            request = request.model_copy(update={"mode": "url", "url": question.url, "requested_schema": None})
        if question.ttl is not None:
            request = request.model_copy(update={"ttl": question.ttl})
        if question.audience == "any":
            request = request.model_copy(update={"audience": None})
        handle = await self.broker.open(request, task.stored_with)
        return await self._own_answer(task, handle, "mcpx's question")

    async def _secrets_for(self, task: CallTask) -> None:
        """The server's secrets are in the keychain before it starts: those missing are asked of the person (one
        question per server, which every call needing it waits on), the call waiting like on any question."""
        r = task.request
        entry = self.entry(r.server)
        if not secrets.names(entry):
            return
        try:
            handle = await self.secrets.asking(r.server, entry, self._own_request(task, r.server, "", {}),
                                               task.stored_with)
            if handle is None:
                return
            answer = await self._own_answer(task, handle, "mcpx's question for its secrets",
                                            self.secrets.settled(r.server, handle))
            if answer.action != "accept":
                raise CallFailed(f"{r.server}.{r.tool} was not run: its server needs secrets, mcpx asked for them "
                                 f"({handle.id}) and {self._why_not(answer)}")
            if lacking := await self.secrets.lacking(r.server, entry):
                raise CallFailed(f"{r.server}.{r.tool} was not run: {', '.join(lacking)} answered in {handle.id} "
                                 "but the keychain did not keep them (the daemon's log says why)")
        except secrets.MissingSecrets as exc:
            raise CallFailed(str(exc)) from None

    async def _run_to_end(self, task: CallTask, work: Awaitable[dict[str, Any]], doing: str) -> None:
        """Run a call to its end and record how it ended, in words that name the server and the question."""
        r = task.request
        try:
            task.result = await work
            await self._finish(task, "completed")
            return
        except asyncio.CancelledError:
            if task.suspended:
                return  # the daemon is stopping: the stored state is what the next daemon resumes from
            task.error = task.end_reason or "the call was cancelled"
            await self._finish(task, task.end_state)
            return
        except (CallFailed, CallTimeout, UpstreamError, RoundsError, TaskError) as exc:
            task.error = str(exc)
        except PeerClosed as exc:
            named = task.abandoned + list(task.open)
            which = f" while question {named[-1]} was open" if named else ""
            task.error = f"server {r.server!r} went away during {r.tool}{which}: {exc}"
        except RpcError as exc:
            task.error = f"server {r.server!r} answered {r.tool} with error {exc.code}: {exc.message}"
            task.result = {"error": exc.to_error()}
        except Exception as exc:
            log.exception("call %s failed", task.id)
            task.error = f"mcpx failed {doing} {r.server}.{r.tool}: {type(exc).__name__}: {exc}"
        await self._finish(task, "failed")

    async def _call_with_era(self, task: CallTask, timeout: float, era: Era | None) -> dict[str, Any]:
        r = task.request
        deadline = PausableDeadline(timeout)
        elicit = self.settings.config.elicit
        async with self.pool.lease(r.server, r.session, era=r.era if r.transparent else era,
                                   declared=r.declared, tool=r.tool) as conn:
            task.era = conn.era
            ctx = CallContext(self.broker, task, conn, deadline, self._save)
            try:
                return await deadline.run(conn.call_tool(r.tool, r.arguments, ctx, elicit.max_rounds, r.meta),
                                          f"{r.server}.{r.tool}")
            except NeedsLegacy as exc:
                if r.transparent:
                    # as if mcpx were not there: the client hears what the server said to its era
                    if exc.error is not None:
                        raise exc.error from None
                    return exc.result or {}
                if era == "legacy":
                    raise
                log.info("server %s answers server/discover but asks over a legacy back-channel; calling it in "
                         "the legacy era from now on", r.server)
                await self.pool.learn_era(r.server, self._fingerprint(r.server), "legacy")
                self.pool.retire(conn)
        return await self._call_with_era(task, timeout, era="legacy")

    def _fingerprint(self, server: str) -> str:
        return entry_fingerprint(self.pool.entry(server))

    async def _finish(self, task: CallTask, state: TaskState) -> None:
        for eid in list(task.open):
            await self.broker.abandon(eid, task.end_reason or task.error or "the call ended")
        task.open.clear()
        task.resume = None
        task.state = state
        data: dict[str, Any] = {"state": state, "server": task.request.server, "tool": task.request.tool}
        if task.error:
            data["error"] = task.scrub(task.error)
        # whoever waits for the result hears first (it is in memory); the final state and its task.done
        # commit together one loop turn behind, so neither building the record nor the database thread is in
        # the reply's way. A call the store never heard of (it never asked) has its end ride with the next
        # commit, within a short horizon: a stream of plain calls costs the store a commit per horizon, not one each
        await task.touch()
        # a callback, not another step of the call's task: queued behind the waiters' wake-ups all the same
        asyncio.get_running_loop().call_soon(self._record_end, task, data)

    def _record_end(self, task: CallTask, data: dict[str, Any]) -> None:
        committed = self.broker.finish_task(task.stored(), data, behind=not task.kept)
        committed.add_done_callback(lambda f: self._forget_finished(task.id, f))

    def _forget_finished(self, tid: str, committed: asyncio.Future[Any]) -> None:
        """Keep the last few finished calls in memory, the rest in the store alone (which answers for them)."""
        if committed.cancelled() or committed.exception() is not None:
            return  # the store does not hold its end: memory stays the only record of it
        self._finished.append(tid)
        while len(self._finished) > KEEP_FINISHED:
            self.tasks.pop(self._finished.popleft(), None)

    async def cancel(self, tid: str, reason: str) -> bool:
        task = self.tasks.get(tid)
        if task is None or task.done:
            return False
        task.fail(reason, "cancelled")
        if task.runner is not None:
            # the call records its own end (_run_to_end); a cancel of this caller is its own, and goes on up
            done, _ = await asyncio.wait({task.runner}, timeout=5)
            if not done:
                log.warning("call %s is still ending 5 s after it was cancelled", tid)
        return True

    # ---- after a restart

    async def _recover(self) -> None:
        for stored in await self.broker.tasks_in(("running", "input-required")):
            resume = Resume.model_validate(stored.resume) if stored.resume else None
            calling = stored.transparent
            request = CallRequest(server=stored.server, tool=stored.tool, arguments=stored.arguments,
                                  session=stored.session, session_source=stored.session_source,
                                  parent=stored.parent, cwd=stored.cwd, surface=stored.surface,
                                  policy_mode=stored.policy_mode, transparent=calling is not None,
                                  era=calling.era if calling else None,
                                  client_caps=calling.client_caps if calling else None)
            # the questions table is the truth about which questions the call raised
            raised = [q.id for q in await self.broker.questions(QuestionFilter(task=stored.id))]
            task = CallTask(id=stored.id, trace=stored.trace, request=request, state=stored.state,
                            era=stored.era, questions=raised, resume=resume, created=stored.created.timestamp(),
                            kept=True)
            self.tasks[task.id] = task
            if task.era == "modern" and resume and request.server in self.settings.config.servers:
                task.runner = asyncio.create_task(self._resume(task), name=f"mcpx-resume-{task.id}")
            else:
                if self.service(request.server) is not None:
                    # a request or command is never sent from a confirmation given to a daemon that is gone
                    task.end_reason = ("the mcpx daemon restarted during the call: whatever mcpx's confirmation had "
                                       "not let go was not sent, and is not sent now (call again to be asked again)")
                else:
                    task.end_reason = ("the mcpx daemon restarted during the call; a legacy-era call lives in its "
                                       "server process and was lost with it")
                for eid in task.questions:
                    await self.broker.abandon(eid, task.end_reason)
                task.error = task.end_reason
                await self._finish(task, "failed")

    async def _reap_lapsed(self, lease: float) -> None:
        """A shared store: end the legacy-era calls of daemons whose lease lapsed (their questions can never be
        delivered), once the lease has lapsed and not before; a modern-era call waits for its own daemon, which
        re-drives it when it comes back."""
        while True:
            await asyncio.sleep(max(0.2, lease / 3))
            try:
                for owner, task in await self.broker.lapsed_tasks(("running", "input-required")):
                    if task.era == "modern" and task.resume:
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

    async def _resume(self, task: CallTask) -> None:
        await self._run_to_end(task, self._redrive(task), "re-driving after the restart")

    async def _redrive(self, task: CallTask) -> dict[str, Any]:
        """Wait for the answers that were due, then send the retry the old daemon never got to send."""
        r = task.request
        resume = task.resume or Resume()
        if resume.task is not None:
            return await self._refollow(task, resume.task)
        entry = self.pool.entry(r.server)
        responses: dict[str, Any] = dict(resume.static)
        waits: dict[str, Any] = {}
        for key, eid in resume.keys.items():
            q, answer = await self.broker.get(eid)
            if answer is not None:
                responses[key] = usable(answer)
            elif q.state == "pending":
                handle = self.broker.handle(eid, q)
                if handle is None:
                    raise CallFailed(f"{eid} cannot be re-attached after the restart")
                task.open[eid] = q
                waits[key] = handle
            else:
                raise CallFailed(f"{eid} was {q.state} during the restart: {q.state_reason or 'no answer'}")
        await task.touch("input-required" if waits else "running")
        for key, handle in waits.items():
            answer = await handle.answer()
            task.open.pop(handle.id, None)
            responses[key] = elicit_result(answer)
        await task.touch("running")
        deadline = PausableDeadline(entry.timeout)
        async with self.pool.lease(r.server, r.session, era="modern", declared=r.declared) as conn:
            task.era = conn.era
            ctx = CallContext(self.broker, task, conn, deadline, self._save)
            for eid in resume.keys.values():
                q, _ = await self.broker.get(eid)
                self.broker.mark_resumed(q, {"era": "modern", "round": resume.round, "afterRestart": True})
            return await deadline.run(conn.resume_modern(
                r.tool, r.arguments, responses, resume.request_state, ctx, self.settings.config.elicit.max_rounds,
                resume.round), f"{r.server}.{r.tool}")

    async def _refollow(self, task: CallTask, upstream_task: str) -> dict[str, Any]:
        """Follow again the task the server made of the call: its questions still pending are re-attached as its
        polls list them again, their answers go with tasks/update, and its result is the call's. A task the server
        no longer knows ends the call, its questions abandoned with the reason."""
        r = task.request
        entry = self.pool.entry(r.server)
        async with self.pool.lease(r.server, r.session, era="modern", declared=r.declared, tool=r.tool) as conn:
            task.era = conn.era
            ctx = CallContext(self.broker, task, conn, PausableDeadline(entry.timeout), self._save)
            try:
                return await conn.follow_task(upstream_task, r.tool, ctx)
            except TaskGone as exc:
                why = ("a stdio server's task lives in its process, which ended with the daemon that started it"
                       if isinstance(entry, StdioServer) else "it expired, or the server lost it")
                task.end_reason = f"after the mcpx daemon restarted, {exc} ({why})"
                for eid in (task.resume.keys.values() if task.resume else ()):
                    await self.broker.abandon(eid, task.end_reason)
                raise CallFailed(task.end_reason) from None

