"""The daemon's gateway to its upstreams: their tools, and calls run by whichever kind serves their server.

The gateway knows no kind's own ways (upstream/kind.py): for a server it picks the kind that serves its config
entry, lists its tools through it (kept until the kind or a reload says they changed), and runs each call as the
call package has it (call/lifecycle.py), with what mcpx asks first in its own name: the server's missing secrets,
and, before a call that may change things, the person's confirmation (`elicit.confirmDestructive`).
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from mcpx.broker.broker import Broker, Handle
from mcpx.broker.models import OpenRequest, SessionSource, StoredTask, TaskDoc, TaskState
from mcpx.broker.refusals import QuestionEnded
from mcpx.call.failures import CallError, UnknownTask
from mcpx.call.lean import LeanCall, Settled
from mcpx.call.lifecycle import Calls
from mcpx.call.record import Call
from mcpx.call.request import CallRequest
from mcpx.call.run import CallRun
from mcpx.config.models import Config, HttpServer, ServerConfig, StdioServer, secret_names
from mcpx.config.source import ConfigSource
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.peer import PeerClosed
from mcpx.mcp.protocol import ToolAnnotations
from mcpx.mcp.stdio import Spawned
from mcpx.oauth.login_error import LoginError
from mcpx.oauth.logins import Logins
from mcpx.shared.upstream_errors import UnknownServer, UpstreamError, refuse_unknown_tool
from mcpx.upstream import secrets
from mcpx.upstream.kind import Authorizer, InstanceInfo, KindFactory, Kinds, LoginKind, Protected, UpstreamKind
from mcpx.upstream.mcp_kind import LeanSend, McpKind
from mcpx.upstream.pool import entry_fingerprint

log = logging.getLogger("mcpx.upstream")

__all__ = ["CallRequest", "Gateway", "UnknownServer", "UnknownTask"]


def changes_things(tool: dict[str, Any] | None) -> bool:
    """A tool changes things unless its server says otherwise (readOnlyHint, or destructiveHint false)."""
    try:
        return ToolAnnotations.model_validate((tool or {}).get("annotations") or {}).may_change_things
    except ValidationError:  # hints that are not what the protocol says they are: no hint at all
        return True


class PlainRoute:
    """What a plain call of one tool needs to know before it is sent (`Gateway.start_lean`), looked up once for the
    config in force and the server's tools as listed: its call is lean (`entry`: its stdio server's) or not (None),
    and its server's fingerprint. Kept while both are the same objects: a reload replaces the config whole, a listing
    replaces the server's tools whole (and a change of them drops them), so one identity test each tells."""

    __slots__ = ("config", "entry", "fingerprint", "tools")

    def __init__(self, config: Config, tools: list[dict[str, Any]] | None, entry: StdioServer | None,
                 fingerprint: str) -> None:
        self.config, self.tools, self.entry, self.fingerprint = config, tools, entry, fingerprint


def confirmed_name(name: str, patterns: list[str]) -> bool:
    """Whether a tool's name is one of an MCP server entry's `confirm` (names or globs: delete_*)."""
    return bool(patterns) and any(fnmatch.fnmatchcase(name, p) for p in patterns)  # none: no generator run


class Gateway:
    def __init__(self, broker: Broker, config: ConfigSource, kinds: Sequence[KindFactory] = (),
                 spawned: Spawned | None = None) -> None:
        self.broker = broker
        self.settings = config  # read at each use: a reload replaces the config whole
        self.logins = Logins(broker, config, self.tools_changed)  # HTTP servers' logins (oauth/logins.py)
        # MCP servers are the kind built in; the MCP surface's own routes (/mcp/SERVER) reach their instances
        self.mcp = McpKind(broker, config, self, spawned=spawned, authorizer=self.logins.login)
        self.kinds = Kinds([self.mcp, *(build(self) for build in kinds)])
        self.calls = Calls(broker, config, self._run, self._follow)
        self._tool_cache: dict[str, list[dict[str, Any]]] = {}
        self._routes: dict[tuple[str, str], PlainRoute] = {}  # (server, tool) -> what its plain calls need
        self.tool_listeners: list[Any] = []  # callables notified when a server's tools change
        self.secrets = secrets.SecretAsker(broker, config, self.tools_changed)
        self._refused_secrets: set[str] = set()  # servers whose secrets the person would not give: listings stop asking
        self._listing_waits: set[asyncio.Task[None]] = set()  # a listing's question for secrets, waited on

    # ---- lifecycle

    async def start(self) -> None:
        for kind in self.kinds.all:
            kind.start()
        await self.calls.recover()
        lease = self.broker.store_info.lease
        if lease is None:
            await self.secrets.abandon_orphans()
            await self.logins.abandon_orphans()
        else:
            self.calls.reap_lapsed(lease)

    async def close(self) -> None:
        await self.calls.close()
        for waiting in list(self._listing_waits):
            waiting.cancel()
        await asyncio.gather(*self._listing_waits, return_exceptions=True)
        await self.secrets.close()
        await self.kinds.each(lambda kind: kind.stop())
        await self.logins.close()

    async def reconfigure(self) -> None:
        servers = self.settings.config.servers
        self.calls.servers_gone(self.calls.servers() - set(servers))
        self._tool_cache = {k: v for k, v in self._tool_cache.items() if k in servers}
        await self.kinds.each(lambda kind: kind.reconfigure())
        for server in servers:
            self._tool_cache.pop(server, None)
        await self._announce()

    # ---- UpstreamHost: what the kinds are told

    def entries(self) -> Mapping[str, ServerConfig]:
        return self.settings.config.servers

    def entry(self, server: str) -> ServerConfig:
        """The server's config entry; UnknownServer, naming the servers there are, for any other."""
        return self.mcp.pool.entry(server)

    def authorizer(self, server: str, protected: Protected) -> Authorizer:
        return self.logins.login(server, protected)

    async def protected(self, server: str) -> Protected | None:
        """What the server's login is for (an HTTP server's URL; a service with `auth`, its base URL), or None
        when it logs in nowhere. UnknownServer for a server not in the config; UpstreamError when it cannot say."""
        entry = self.entry(server)
        if isinstance(entry, HttpServer):
            return Protected.of(entry)
        kind = self.kinds.of(entry)
        return await kind.protected(server) if isinstance(kind, LoginKind) else None

    def kind(self, server: str) -> UpstreamKind:
        return self.kinds.of(self.entry(server))

    def proxied(self, server: str) -> None:
        """UnknownServer unless `server` is an MCP server, which /mcp/SERVER passes through to as it is."""
        if (kind := self.kind(server)) is not self.mcp:
            raise UnknownServer(f"server {server!r} is {'an OpenAPI service' if kind.name == 'openapi' else 'commands'}"
                                f", not an MCP server: its tools are served on /mcp as {server}_TOOL, not on "
                                f"/mcp/{server}")


    async def instances(self) -> list[InstanceInfo]:
        """What every kind runs now, for `mcpx status`."""
        return [info for infos in await self.kinds.each(lambda kind: kind.instances()) for info in infos]

    # ---- tools

    async def tools_changed(self, server: str) -> None:
        self._tool_cache.pop(server, None)
        await self._announce()

    async def _announce(self) -> None:
        for listener in list(self.tool_listeners):
            try:
                listener()
            except Exception:  # one listener's trouble is not the reload's, nor the other listeners'
                log.exception("a listener to the tool list failed")

    async def tools(self, server: str, asker: tuple[str, SessionSource] | None = None) -> list[dict[str, Any]]:
        """The server's tools (listed once, then from memory). `asker`: the session a question this listing opens
        belongs to (a server's missing secrets); by default the config's."""
        entry = self.entry(server)
        if server not in self._tool_cache:
            if secret_names(entry):
                await self._secrets_listed(server, entry, asker or (self.settings.fallback_session(), "fallback"))
            try:
                self._tool_cache[server] = await self.kinds.of(entry).tools(server)
            except (UpstreamError, RpcError, PeerClosed) as exc:
                if isinstance(entry, HttpServer) and self.logins.needs_login(server):
                    await self._login_listed(server, entry, asker or (self.settings.fallback_session(), "fallback"))
                raise exc from None
        return self._tool_cache[server]

    async def _login_listed(self, server: str, entry: HttpServer, asker: tuple[str, SessionSource]) -> None:
        """A listing never waits for a person: a server that needs a login has its login question opened (or found
        open), and the listing fails at once naming it; once logged in, the server's tools are listed again."""
        try:
            handle = await self.logins.asking(server, entry, OpenRequest(
                session=asker[0], session_source=asker[1], server="mcpx", message="-"))
        except LoginError as exc:
            raise UpstreamError(f"server {server!r} needs a login, and it cannot be begun: {exc}") from None
        raise UpstreamError(f"server {server!r} needs login: mcpx asked for it in {handle.id} (open its link from the "
                            f"inbox, `mcpx elicit show {handle.id}`, or run `mcpx auth login {server}`)")

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

    def task(self, tid: str) -> Call | None:
        return self.calls.get(tid)

    async def task_doc(self, tid: str) -> TaskDoc:
        return await self.calls.doc(tid)

    async def tasks(self, states: tuple[TaskState, ...], session: str | None = None) -> list[StoredTask]:
        return await self.calls.listed(states, session)

    async def start_call(self, request: CallRequest) -> Call:
        entry = self.entry(request.server)  # an unknown server is refused before anything is recorded
        # and a tool the server lacks, in the words that name its tools and the nearest; on /mcp/SERVER the server
        # answers for itself, as if mcpx were not there
        if not request.transparent:
            refuse_unknown_tool(request.server, request.tool, await self._listed(request.server, entry))
        return self.calls.start(request)

    async def _listed(self, server: str, entry: ServerConfig) -> list[dict[str, Any]] | None:
        """The server's tools, to check a call by: from memory, else listed now (a REST call to a server not listed
        yet, one a reload replaced; the call would start the server anyway). None, and the call goes on to the server,
        where listing would need the person (a secret not in the keychain: the call asks for it as its own mode
        allows, where a listing would ask whatever that mode is) or fails (the call meets the same trouble, and says
        it in its own words); a login a listing finds needed is asked for by the call."""
        if (known := self._tool_cache.get(server)) is not None:
            return known
        try:
            if await self.secrets.lacking(server, entry):
                return None
            self._tool_cache[server] = listed = await self.kinds.of(entry).tools(server)
        except (UpstreamError, RpcError, PeerClosed, TimeoutError):
            return None
        except Exception:  # whatever else it is, the call is not refused for it: the log has it
            log.exception("listing %s's tools before a call failed", server)
            return None
        return listed

    async def cancel(self, tid: str, reason: str) -> bool:
        return await self.calls.cancel(tid, reason)

    def cancel_now(self, tid: str, reason: str) -> None:
        """`cancel` from a callback: the call ends as soon as its runner takes its next step, not waited for."""
        self.calls.cancel_now(tid, reason)

    def _scope(self, call: Call) -> CallRun:
        return CallRun(self.broker, self.settings, call, self.entry(call.request.server), self.calls.save)

    async def _logged_in(self, scope: CallRun, call: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run the call; when its server says it needs a login (a 401 no kept login or refresh could answer, a
        step-up's 403), ask the person in the server's one login question, the call waiting on it like on any
        question, then run the call again (it was refused before the server ran it)."""
        r = scope.request
        for _login in range(3):
            try:
                return await call()
            except (UpstreamError, RpcError, PeerClosed, CallError):
                # an HTTP server's login, or a REST service's (services/kinds.py): whichever the server's login is for
                protected = self.logins.held(r.server)
                if protected is None or not self.logins.needs_login(r.server):
                    raise
            try:
                handle = await self.logins.asking(r.server, protected, scope.own_request(r.server, "", {}),
                                                  scope.call.stored_with)
            except LoginError as exc:
                raise CallError(f"{r.server}.{r.tool} was not run: its server needs a login, and it cannot be "
                                 f"begun: {exc}") from None
            answer = await scope.own_answer(handle, "mcpx's login question")
            if answer.action == "decline":
                raise CallError(f"{r.server}.{r.tool} was not run: login declined ({handle.id}, by {answer.by})")
            if answer.action != "accept":
                raise CallError(f"{r.server}.{r.tool} was not run: nobody logged in ({handle.id}: "
                                 f"{scope.why_not(answer)})")
        raise CallError(f"{r.server}.{r.tool} was not run: its server still refused after three logins")

    async def _run(self, call: Call, lean: LeanSend | None = None) -> dict[str, Any]:
        """Run a call to its result: what mcpx asks first (secrets, a confirmation), then its kind's call. `lean`:
        the call was sent on the lean path (`start_lean`, which found nothing to ask first): taken on from there."""
        try:
            if lean is not None:
                scope = CallRun(self.broker, self.settings, call, lean.entry, self.calls.save)
                once: list[LeanSend] = [lean]  # a login's retry sends the call again, as the full path does
                return await self._logged_in(scope, lambda: self.mcp.call(scope, once.pop() if once else None))
            scope = self._scope(call)
            await self._secrets_for(scope)
            entry = scope.entry
            # an MCP server's tools; a service confirms its own writes, exactly (its entry's `confirm`)
            if isinstance(entry, (StdioServer, HttpServer)):
                if confirmed_name(call.request.tool, entry.confirm):
                    await scope.confirm_destructive("is one its server's confirm names")
                elif self.settings.config.elicit.confirm_destructive and await self._may_change_things(call):
                    await scope.confirm_destructive("may change or delete things")
            return await self._logged_in(scope, lambda: self.kinds.of(scope.entry).call(scope))
        except UpstreamError as exc:  # the server went from the config meanwhile, or would not start
            raise CallError(str(exc)) from None

    def start_lean(self, request: CallRequest, settled: Settled) -> LeanCall | None:
        """A plain call written now on the lean path (call/lean.py), or None when it is not one: started then as any
        call (`start_call`). Plain: a stdio MCP server's tool listed already, nothing for mcpx to ask first (no
        secrets, no confirmation), mcpx's own capabilities (not /mcp/SERVER), and an instance to be had without
        waiting. `settled` hears how it leaves the lean path (LeanCall's), never before this returns."""
        if request.transparent:
            return None
        server, config = request.server, self.settings.config
        route = self._routes.get((server, request.tool))
        if route is None or route.config is not config or route.tools is not self._tool_cache.get(server):
            route = self._route(server, request.tool, config)
        if route.entry is None:
            return None
        lease = self.mcp.pool.lease_now(server, route.entry, route.fingerprint, request.session, request.tool)
        if lease is None:
            return None
        lean = self.calls.leaning(request)  # its ids; its Call, scope, hooks and deadline only if it needs them
        try:
            sent = self.mcp.send_plain(lean, route.entry, lease, self._run)
        except BaseException:
            lease.release()
            raise
        return self.calls.lean(lean, sent, settled)

    def _route(self, server: str, tool: str, config: Config) -> PlainRoute:
        """What `start_lean` looks up for a tool of a server, looked up now and kept until the config in force or the
        server's tools are not those it was looked up in. UnknownServer, UnknownTool: as `entry` and the listing say
        (then nothing is kept: a server or a tool that comes later is looked up again)."""
        entry = self.entry(server)
        known = self._tool_cache.get(server)
        lean: StdioServer | None = None
        if (known is not None and isinstance(entry, StdioServer) and not secret_names(entry)
                and not confirmed_name(tool, entry.confirm)):
            for listed in known:  # one look for both checks
                if listed.get("name") == tool:
                    break
            else:
                refuse_unknown_tool(server, tool, known)
            if not (config.elicit.confirm_destructive and changes_things(listed)):
                lean = entry
        route = PlainRoute(config, known, lean, entry_fingerprint(lean) if lean is not None else "")
        if len(self._routes) > 1000:  # tools of servers gone, under configs gone: not kept for ever
            self._routes.clear()
        self._routes[(server, tool)] = route
        return route

    async def _follow(self, call: Call) -> dict[str, Any]:
        assert call.remembered is not None  # Calls.recover follows only what was remembered
        try:
            scope = self._scope(call)
            return await self.kinds.of(scope.entry).follow(scope, call.remembered)
        except UpstreamError as exc:
            raise CallError(str(exc)) from None

    async def _may_change_things(self, call: Call) -> bool:
        try:
            tool = await self.tool(call.request.server, call.request.tool)
        except (UpstreamError, RpcError, PeerClosed, TimeoutError):
            tool = None
        return changes_things(tool)

    async def _secrets_for(self, scope: CallRun) -> None:
        """The server's secrets are in the keychain before it starts: those missing are asked of the person (one
        question per server, which every call needing it waits on), the call waiting like on any question."""
        r = scope.request
        entry = scope.entry
        if not secret_names(entry):
            return
        try:
            handle = await self.secrets.asking(r.server, entry, scope.own_request(r.server, "", {}),
                                               scope.call.stored_with)
            if handle is None:
                return
            answer = await scope.own_answer(handle, "mcpx's question for its secrets",
                                            self.secrets.settled(r.server, handle))
            if answer.action != "accept":
                raise CallError(f"{r.server}.{r.tool} was not run: its server needs secrets, mcpx asked for them "
                                 f"({handle.id}) and {scope.why_not(answer)}")
            if lacking := await self.secrets.lacking(r.server, entry):
                raise CallError(f"{r.server}.{r.tool} was not run: {', '.join(lacking)} answered in {handle.id} "
                                 "but the keychain did not keep them (the daemon's log says why)")
        except secrets.MissingSecrets as exc:
            raise CallError(str(exc)) from None
