"""One connection to one upstream server instance, in whichever era it speaks.

Legacy: `initialize` offering 2025-11-25; the server asks mid-call with `elicitation/create`,
`ping`, `roots/list`, and may announce `notifications/elicitation/complete`.
Modern (2026-07-28): `server/discover` first; every request carries `_meta`; a call may come
back `input_required` and is retried with `inputResponses` and the `requestState` verbatim.

A legacy instance may carry several calls at once. What the server asks mid-call names no call
on a stdio wire (the SDKs keep the request it relates to in their transport's metadata), so
`Attribution` works out whose it is: the only call in flight, or the one left once the others
have had their answers; never a guess.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mcpx.config import START_FLOOR, HttpServer, ServerConfig, StdioServer
from mcpx.errors import McpxError
from mcpx.mcp import jsonrpc
from mcpx.mcp.http_client import RELATED, HttpChannel
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.peer import Peer, PeerClosed
from mcpx.mcp.protocol import (
    CLIENT_INFO,
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    ElicitParams,
    Era,
    legacy_client_capabilities,
    modern_meta,
)
from mcpx.mcp.stdio import ProcessChannel, StartError
from mcpx.upstream.environment import command_problem, server_environment

log = logging.getLogger("mcpx.upstream")

# The longest a request of the server's is held while the calls beside it finish (see Attribution): then it is
# refused, and its tools run alone. Those calls are of tools seen to finish without asking, so they are quick as a
# rule; one that is not must not leave a question unopened, and its call hanging, for as long as it runs.
HOLD_LIMIT = 10.0
# How the SDKs say "I can only ask over a legacy back-channel" on a modern request: the mcp SDK
# answers with an error, FastMCP with an isError result. Either way the call is re-driven in the
# legacy era, where the question can be asked.
BACK_CHANNEL = re.compile(r"server-initiated requests.*(back-channel|unavailable)|back-channel for server-initiated",
                          re.IGNORECASE | re.DOTALL)


def asks_over_back_channel(result: dict[str, Any]) -> bool:
    if not result.get("isError"):
        return False
    texts = " ".join(c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict))
    return bool(BACK_CHANNEL.search(texts))


class UpstreamError(McpxError):
    """Something about an upstream the caller should read: which server, what happened."""


class NeedsLegacy(UpstreamError):
    """A server that answered `server/discover` yet asks over a legacy back-channel (the SDK's plain ctx.elicit)."""

    def __init__(self, message: str, error: RpcError | None = None, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error, self.result = error, result  # what the server said, for a caller that wants it verbatim


# a round that carries only requestState is retried after a pause, 50 ms doubling to 250 ms (as the mcp SDK's client)
STATE_ONLY_FIRST_PAUSE = 0.05
STATE_ONLY_MAX_PAUSE = 0.25


class TooManyRounds(UpstreamError):
    pass


def start_bound(entry: ServerConfig) -> float:
    """How long one start of a server may take, handshake included: its `timeout`, never under START_FLOOR."""
    return max(entry.timeout, START_FLOOR)


class CallHooks(Protocol):
    """What a call in flight offers its server: questions, roots, progress."""

    async def ask(self, params: ElicitParams) -> dict[str, Any]: ...

    async def input_required(self, result: dict[str, Any], round_no: int) -> dict[str, Any]: ...

    async def complete(self, elicitation_id: str) -> None: ...

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def client_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """roots/list or sampling/createMessage: to the calling client if it serves it, else mcpx's own answer."""
        ...

    def fixed_answer(self, method: str) -> dict[str, Any] | None:
        """The answer to `method` this call gives without asking anyone (mcpx's own roots), or None."""
        ...

    def roots(self) -> list[dict[str, Any]]: ...


@dataclass(eq=False)
class InFlight:
    """A call on this instance now: who hears about it, and its progress token (the caller's, and mcpx's own
    on the wire: two callers may pick the same token, and an instance may carry both their calls)."""

    hooks: CallHooks
    tool: str = ""
    progress: Any = None
    wire_token: str | None = None
    asked: bool = False  # the server asked something of this call (or may have: one it could not be told from)
    wire_id: jsonrpc.Id | None = None  # its tools/call's id on the wire (legacy)

    def numbered(self, wire_id: jsonrpc.Id) -> None:
        self.wire_id = wire_id


@dataclass(eq=False)
class Held:
    """A request of the server's that came while several calls were in flight: whose it is, once that is known."""

    suspects: list[InFlight]
    owner: asyncio.Future[InFlight | None]
    why: str = ""  # why it can never be told, once owner is None

    def settle(self, call: InFlight | None, why: str = "") -> None:
        if not self.owner.done():
            self.why = why
            self.owner.set_result(call)


class Untold(RpcError):
    """A request of the server's whose call cannot be told: refused, naming the calls it may have come from."""

    def __init__(self, message: str, suspects: list[InFlight]) -> None:
        super().__init__(jsonrpc.INTERNAL_ERROR, message)
        self.suspects = suspects


class Attribution:
    """Which call a request of the server's belongs to, when the wire does not say.

    What it rests on is what the single-call rule always rested on: a server asks from inside the
    handler of the call it asks for, and waits for the answer before it answers that call (the
    SDKs' `ctx.elicit` does). So a request that comes while one call is in flight is that call's;
    one that comes while several are is held, and each of those calls that then gets its server's
    answer is ruled out; the last one left is the owner. A call that ends without its server's
    answer (cancelled, timed out) might have been the owner, and then nobody can tell: the request
    is refused, as it is when every suspect is waiting on a held request of its own, or when the
    suspects have not all finished within `limit` seconds.
    """

    def __init__(self, server: str, limit: float = HOLD_LIMIT) -> None:
        self.server = server
        self.limit = limit
        self.calls: list[InFlight] = []
        self.held: list[Held] = []

    def begin(self, call: InFlight) -> None:
        self.calls.append(call)

    def end(self, call: InFlight, answered: bool) -> None:
        """`call` left the wire: with its server's answer (it was waiting on no held request), or without one."""
        self.calls.remove(call)
        for held in [h for h in self.held if call in h.suspects]:
            if not answered:
                held.settle(None, f"the call to {call.tool or 'a tool'} ended without its server's answer while "
                                  "this request waited to be told apart, and it may have been that call's")
                continue
            held.suspects.remove(call)
            if len(held.suspects) == 1:
                held.settle(held.suspects[0])
            elif not held.suspects:
                held.settle(None, "every call in flight when it came has had its answer since")
        self._unstick()

    async def owner(self, method: str, related: jsonrpc.Id | None = None) -> InFlight | None:
        """The call the request in hand belongs to: the one it came related to (Streamable HTTP: on that call's
        response stream), else worked out; None with no call in flight; Untold if it cannot be told."""
        for call in self.calls:
            if related is not None and call.wire_id == related:
                return call
        if len(self.calls) <= 1:
            return self.calls[0] if self.calls else None
        held = Held(list(self.calls), asyncio.get_running_loop().create_future())
        self.held.append(held)
        log.info("upstream %s sent %s while %d calls were in flight on one instance: held until it is known "
                 "whose it is", self.server, method, len(held.suspects))
        self._unstick()
        try:
            await asyncio.wait_for(asyncio.shield(held.owner), self.limit)
        except TimeoutError:
            held.settle(None, f"the calls it may be from did not all finish within {self.limit:g} s")
        finally:
            self.held.remove(held)
        owner = held.owner.result()
        if owner is None:
            tools = ", ".join(sorted({c.tool for c in held.suspects}))
            raise Untold(f"mcpx cannot tell which of the calls in flight on this instance ({tools}) sent this "
                         f"{method}: nothing on the wire says, and {held.why}; it runs these tools one call at a "
                         "time from now on, so calling again works", held.suspects)
        return owner

    def _unstick(self) -> None:
        """Refuse the held requests once no suspect can end on its own: as many held as there are suspects."""
        waiting = [h for h in self.held if not h.owner.done()]
        suspects = {id(c) for h in waiting for c in h.suspects}
        if waiting and len(waiting) >= len(suspects):
            for held in waiting:
                held.settle(None, f"each of those {len(suspects)} calls may be waiting for a request like it")


@dataclass
class ServerFacts:
    era: Era
    version: str
    server_info: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def param_headers(tool: dict[str, Any]) -> dict[str, str]:
    """{argument: header name} for a tool's x-mcp-header annotated top-level arguments."""
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    return {arg: str(p["x-mcp-header"]) for arg, p in props.items() if isinstance(p, dict) and "x-mcp-header" in p}


def x_mcp_header_problem(tool: dict[str, Any]) -> str | None:
    """Why a tool's x-mcp-header annotations are invalid (SEP-2243), or None; such a tool must be left out."""
    seen: set[str] = set()
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    for arg, prop in props.items():
        if not isinstance(prop, dict) or "x-mcp-header" not in prop:
            continue
        header = prop["x-mcp-header"]
        if not isinstance(header, str) or not header or not _TOKEN.match(header):
            return f"{arg}: x-mcp-header {header!r} is not a header name token"
        if prop.get("type") not in ("string", "integer", "boolean"):
            return f"{arg}: x-mcp-header is only for string, integer or boolean arguments, not {prop.get('type')!r}"
        if header.lower() in seen:
            return f"{arg}: x-mcp-header {header!r} is used twice"
        seen.add(header.lower())
    schema = tool.get("inputSchema") or {}

    def nested(node: Any, depth: int) -> bool:
        if isinstance(node, dict):
            if depth > 1 and "x-mcp-header" in node:
                return True
            return any(nested(v, depth + 1) for k, v in node.items() if k != "x-mcp-header")
        if isinstance(node, list):
            return any(nested(v, depth) for v in node)
        return False

    if any(nested(p, 0) for p in props.values() if isinstance(p, dict)) or "x-mcp-header" in schema:
        return "x-mcp-header appears somewhere other than a top-level argument"
    return None


def roots_for(cwd: str | None) -> list[dict[str, Any]]:
    path = Path(cwd or ".").resolve()
    return [{"uri": path.as_uri(), "name": path.name or str(path)}]


class UpstreamConnection:
    def __init__(self, name: str, entry: ServerConfig, session: str, declared: dict[str, Any] | None = None) -> None:
        self.name = name
        self.entry = entry
        self.session = session
        # what mcpx tells this server it can deliver: its own default, or a transparent client's own capabilities
        self.declared = declared if declared is not None else legacy_client_capabilities()
        self.channel: ProcessChannel | HttpChannel | None = None
        self.peer: Peer | None = None
        self.facts: ServerFacts | None = None
        self.attribution = Attribution(name)  # the calls in flight, and whose each request of the server's is
        self._tokens = itertools.count(1)
        self.asking = 0  # requests of the server's that wait for someone (a person, the client) or to be told apart
        self._asked: dict[str, InFlight] = {}  # a url-mode question's elicitationId -> the call it is for
        self._completed: set[str] = set()  # completions announced before their question's owner was known
        # told what a call of a tool did: asked (or may have), or finished without asking
        self.on_learnt: Callable[[str, bool], None] | None = None
        self.on_calm: Callable[[], None] | None = None  # told once nothing the server asked is pending
        self.on_tools_changed: Callable[[], Awaitable[None]] | None = None
        # the clients that forwarded requests through this instance (/mcp/SERVER): who hears its other
        # notifications — resources/updated only whoever subscribed to the resource, the rest everyone listening
        self._listeners: dict[object, _Listener] = {}
        self.tools: list[dict[str, Any]] | None = None
        self.notes: list[str] = []  # what the server was not given (a ${NAME} not set), told with any failure
        self._modern_meta: dict[str, Any] | None = None  # what every modern request's _meta holds; never changed

    # ---- life

    @property
    def alive(self) -> bool:
        return self.peer is not None and self.peer.alive

    @property
    def pid(self) -> int | None:
        return self.channel.pid if isinstance(self.channel, ProcessChannel) else None

    @property
    def era(self) -> Era | None:
        return self.facts.era if self.facts else None

    @property
    def calls(self) -> list[InFlight]:
        return self.attribution.calls

    def describe(self) -> str:
        return f"`{self.entry.shown}`" if isinstance(self.entry, StdioServer) else self.entry.shown

    async def open(self, era_hint: Era | None = None) -> ServerFacts:
        """Start the server (stdio) or reach it (HTTP), then settle on an era.

        Each request of the handshake waits as long as the start may take (`start_bound`): a
        server that is slow to start is waited for, and silence is a failure, never an era.
        """
        bound = start_bound(self.entry)
        await self._connect()
        try:
            if era_hint == "legacy":
                facts = await self._initialize(bound)
            else:
                facts = await self._probe_modern(bound) or await self._legacy_after_probe(bound)
        except (PeerClosed, RpcError, UpstreamError) as exc:
            reason = self._failure(exc)
            await self.close()
            raise self._failed(reason) from None
        except BaseException:
            await self.close()  # cancelled while it started: the process must not outlive the call that wanted it
            raise
        self.facts = facts
        if isinstance(self.channel, HttpChannel):
            self.channel.protocol_version = facts.version
        log.info("upstream %s: %s era, protocol %s", self.name, facts.era, facts.version)
        return facts

    async def _connect(self) -> None:
        if isinstance(self.entry, StdioServer):
            given = server_environment(self.entry.env, os.environ)
            self.notes = given.notes(self.name)
            for note in self.notes:
                log.warning("%s", note)
            log.info("upstream %s: starting %s", self.name, self.describe())
            try:
                self.channel = await ProcessChannel.start(self.name, self.entry.command, self.entry.args, given.env,
                                                          self.entry.cwd)
            except StartError as exc:
                # exec's own words are a bare "[Errno 2]" (uvloop names no file): say what is missing, as check does
                why = command_problem(self.entry.command, given.env, self.entry.cwd)
                if why is None:
                    raise self._failed(str(exc)) from None
                key, words = why
                raise self._failed(f"server {self.name!r} could not start {self.describe()}: "
                                   + (f"its cwd {words}" if key == "cwd" else words)) from None
        else:
            assert isinstance(self.entry, HttpServer)
            self.channel = HttpChannel(self.name, self.entry.url, self.entry.headers)
        self.peer = Peer(self.channel, self._on_request, self._on_notification, name=f"upstream:{self.name}")
        self.peer.start()

    def _failed(self, reason: str) -> UpstreamError:
        """The error a failed start becomes: logged, with what the server was not given."""
        reason = "\n".join([reason, *self.notes])
        log.warning("upstream %s: %s", self.name, reason)
        return UpstreamError(reason)

    def _failure(self, exc: Exception) -> str:
        if isinstance(exc, PeerClosed) or (self.peer is not None and not self.peer.alive):
            detail = self.channel.describe_exit() if self.channel else str(exc)
            return f"server {self.name!r} did not start: {detail}"
        if isinstance(exc, UpstreamError):
            return str(exc)
        return f"server {self.name!r} ({self.describe()}) refused the handshake: {exc}"

    async def _handshake(self, method: str, params: dict[str, Any], bound: float) -> dict[str, Any]:
        assert self.peer is not None
        try:
            return await self.peer.request(method, params, timeout=bound)
        except TimeoutError:
            tail = self.channel.tail() if isinstance(self.channel, ProcessChannel) else ""
            raise UpstreamError(
                f"server {self.name!r} ({self.describe()}) did not answer {method} within {bound:g}s (its `timeout`, "
                f"and at least {START_FLOOR:g}s, is how long a start may take)"
                + (f"; its stderr ends:\n{tail}" if tail else "")) from None

    async def _probe_modern(self, bound: float) -> ServerFacts | None:
        """The server's modern facts, or None when its answer says it is legacy (an error is such an answer)."""
        try:
            res = await self._handshake("server/discover", {"_meta": modern_meta(self.declared)}, bound)
        except RpcError as exc:
            if exc.code == jsonrpc.UNSUPPORTED_VERSION and isinstance(exc.data, dict):
                ours = [v for v in exc.data.get("supported", []) if v in MODERN_VERSIONS]
                if ours:
                    return ServerFacts("modern", ours[0])
            return None  # any other error: a legacy server
        supported = res.get("supportedVersions") or []
        ours = [v for v in supported if v in MODERN_VERSIONS]
        if not ours:
            return None
        info = (res.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
        return ServerFacts("modern", ours[0], info, res.get("capabilities") or {}, res.get("instructions"))

    async def _legacy_after_probe(self, bound: float) -> ServerFacts:
        """`initialize`, after the probe was answered as a legacy server answers it.

        Most such servers then take `initialize`. One that settles its era on the first request it
        reads (the SDK's dual-era loop, on a discover it would not serve) refuses it, or goes away:
        a fresh process, hearing `initialize` first, is asked instead.
        """
        try:
            return await self._initialize(bound)
        except (RpcError, PeerClosed) as exc:
            log.info("upstream %s answered server/discover as a legacy server, then refused initialize (%s); "
                     "asking a fresh %s", self.name, exc,
                     "process" if isinstance(self.entry, StdioServer) else "session")
        await self.close()
        await self._connect()
        return await self._initialize(bound)

    async def _initialize(self, bound: float) -> ServerFacts:
        assert self.peer is not None
        res = await self._handshake("initialize", {
            "protocolVersion": LATEST_LEGACY, "capabilities": self.declared, "clientInfo": CLIENT_INFO}, bound)
        version = res.get("protocolVersion")
        if version not in LEGACY_VERSIONS:
            raise UpstreamError(f"server {self.name!r} answered initialize with protocolVersion {version!r}, "
                                f"which mcpx does not speak (it speaks {', '.join(LEGACY_VERSIONS)})")
        if isinstance(self.channel, HttpChannel):
            self.channel.protocol_version = version
        await self.peer.notify("notifications/initialized")
        if isinstance(self.channel, HttpChannel):
            self.channel.listen()
        return ServerFacts("legacy", version, res.get("serverInfo") or {}, res.get("capabilities") or {},
                           res.get("instructions"))

    async def close(self) -> None:
        if self.peer is not None:
            await self.peer.close()
        elif self.channel is not None:
            await self.channel.close()

    # ---- requests to the server

    def _params(self, params: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Modern requests carry version, capabilities and client info in _meta, every one of them."""
        if self.era == "modern":
            if self._modern_meta is None:
                self._modern_meta = modern_meta(self.declared)  # the same on every request of this connection
            extra = params.get("_meta")
            if extra or meta:
                return {**params, "_meta": {**self._modern_meta, **(extra or {}), **(meta or {})}}
            return {**params, "_meta": self._modern_meta}
        if meta:
            return {**params, "_meta": {**(params.get("_meta") or {}), **meta}}
        return params

    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = 30.0,
                      ) -> dict[str, Any]:
        assert self.peer is not None
        return await self.peer.request(method, self._params(params or {}), timeout=timeout)

    async def list_tools(self, refresh: bool = False) -> list[dict[str, Any]]:
        if self.tools is not None and not refresh:
            return self.tools
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _page in range(100):  # a paginator that never ends must not hang us
            res = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(t for t in res.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str))
            cursor = res.get("nextCursor")
            if not cursor:
                break
        if isinstance(self.channel, HttpChannel):
            tools = [t for t in tools if self._headers_ok(t)]
            self.channel.param_headers = {t["name"]: param_headers(t) for t in tools}
        self.tools = tools
        return tools

    def _headers_ok(self, tool: dict[str, Any]) -> bool:
        problem = x_mcp_header_problem(tool)
        if problem:
            log.warning("upstream %s: tool %r left out: its x-mcp-header annotations are invalid (%s)", self.name,
                        tool.get("name"), problem)
        return problem is None

    async def call_tool(self, tool: str, arguments: dict[str, Any], hooks: CallHooks, max_rounds: int = 8,
                        meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """The tool's result. Questions go to `hooks`; a modern call is retried until it completes."""
        assert self.peer is not None
        if isinstance(self.channel, HttpChannel) and self.era == "modern" and self.tools is None:
            await self.list_tools()  # its x-mcp-header arguments must be mirrored into Mcp-Param-* headers
        call = InFlight(hooks, tool)
        # progress is always asked for, under mcpx's own token: the task keeps the last report for whoever follows
        # the call without a relay (`mcpx call` on a terminal); the caller hears it only when it asked, by its token
        call.progress, call.wire_token = (meta or {}).get("progressToken"), f"mcpx-{next(self._tokens)}"
        meta = {**(meta or {}), "progressToken": call.wire_token}
        answered = False  # the server answered the call (a result or an error), as opposed to mcpx leaving it
        self.attribution.begin(call)
        try:
            params: dict[str, Any] = {"name": tool, "arguments": arguments}
            if self.era == "legacy":
                result = await self.peer.request("tools/call", self._params(params, meta),
                                                 numbered=call.numbered)
            else:
                result = await self._drive(params, hooks, max_rounds, meta, 0)
            answered = True
            return result
        except (RpcError, UpstreamError):
            answered = True  # what the server said ended it: an error reply, or a result mcpx would not take
            raise
        finally:
            self._end(call, answered)

    def _end(self, call: InFlight, answered: bool) -> None:
        self.attribution.end(call, answered)
        if answered and not call.asked and self.era == "legacy":  # a modern call's questions come in its result
            self._learnt(call, asks=False)
        for eid in [e for e, c in self._asked.items() if c is call]:
            del self._asked[eid]

    async def resume_modern(self, tool: str, arguments: dict[str, Any], responses: dict[str, Any],
                            request_state: str | None, hooks: CallHooks, max_rounds: int, round_no: int,
                            ) -> dict[str, Any]:
        """Re-drive a modern call after a restart: send the retry that was due, then carry on as usual."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "inputResponses": responses}
        if request_state is not None:
            params["requestState"] = request_state
        call = InFlight(hooks, tool)
        self.attribution.begin(call)
        try:
            return await self._drive(params, hooks, max_rounds, None, round_no)
        finally:
            self._end(call, False)  # modern: its questions come back in its own result, none is ever held

    async def _drive(self, params: dict[str, Any], hooks: CallHooks, max_rounds: int, meta: dict[str, Any] | None,
                     round_no: int) -> dict[str, Any]:
        """The call's rounds: a round that asks (inputRequests) counts towards `max_rounds`; one that carries only
        requestState (the server is still at it) is retried after a pause that grows as the SDK's does, 50 ms
        doubling to 250 ms, and is bounded by the call's own deadline, not by the count: the SDK client did not
        count on mcpx retrying it eight times within milliseconds."""
        assert self.peer is not None
        tool, arguments = params["name"], params["arguments"]
        pause = STATE_ONLY_FIRST_PAUSE
        while True:
            try:
                res = await self.peer.request("tools/call", self._params(params, meta))
            except RpcError as exc:
                if BACK_CHANNEL.search(exc.message):
                    raise NeedsLegacy(exc.message, error=exc) from None
                raise
            kind = res.get("resultType", "complete")
            if kind == "complete":
                if asks_over_back_channel(res):
                    raise NeedsLegacy(" ".join(c.get("text", "") for c in res.get("content") or []), result=res)
                return res
            if kind != "input_required":
                raise UpstreamError(f"server {self.name!r} answered tools/call with resultType {kind!r}, "
                                    "which mcpx does not know")
            if res.get("inputRequests"):
                round_no += 1
                if round_no > max_rounds:
                    raise TooManyRounds(f"server {self.name!r} kept asking for input: {max_rounds} rounds of "
                                        f"input_required on {tool} and still no result (elicit.maxRounds)")
                pause = STATE_ONLY_FIRST_PAUSE
                params = {"name": tool, "arguments": arguments,
                          "inputResponses": await hooks.input_required(res, round_no)}
            else:
                await asyncio.sleep(pause)
                pause = min(pause * 2, STATE_ONLY_MAX_PAUSE)
                params = {"name": tool, "arguments": arguments}
            if "requestState" in res:
                params["requestState"] = res["requestState"]  # echoed byte for byte

    # ---- what the server sends us

    def _current(self) -> CallHooks | None:
        """The call a notification that names none belongs to: the only one in flight; with several, nobody's
        (a log line then goes to the daemon's log rather than to a caller it may not be about)."""
        return self.calls[0].hooks if len(self.calls) == 1 else None

    def _progress_of(self, params: dict[str, Any]) -> tuple[CallHooks, dict[str, Any]] | None:
        """Whose progress this is (the call whose request carried its token), with the caller's own token back."""
        token = params.get("progressToken")
        for call in self.calls:
            if call.wire_token is not None and call.wire_token == token:
                return call.hooks, {**params, "progressToken": call.progress}
        return None

    def _fixed_answer(self, method: str) -> dict[str, Any] | None:
        """An answer that is the same whichever call asked (mcpx's own roots for every call in flight), or None:
        then nobody need be told apart, and nobody waits."""
        if not self.calls:
            return {"roots": roots_for(None)} if method == "roots/list" else None
        answers = [call.hooks.fixed_answer(method) for call in self.calls]
        return answers[0] if answers[0] is not None and all(a == answers[0] for a in answers) else None

    async def _on_request(self, msg: Message) -> dict[str, Any]:
        method = str(msg.get("method"))
        params = msg.get("params") or {}
        if method == "ping":
            return {}
        ask = self._elicitation(params) if method == "elicitation/create" else None
        if ask is None and method not in ("roots/list", "sampling/createMessage"):
            raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}")
        fixed = self._fixed_answer(method)
        if fixed is not None:
            return fixed
        self.asking += 1
        try:
            call = await self.attribution.owner(method, jsonrpc.id_of(msg.get(RELATED)))
            if call is None:
                if method == "elicitation/create":
                    raise RpcError(jsonrpc.INTERNAL_ERROR, "mcpx has no call in flight to attach this question to")
                raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}")
            self._learnt(call, asks=True)
            if ask is None:
                return await call.hooks.client_request(method, params)
            eid = ask.elicitation_id
            if eid is not None:
                self._asked[eid] = call
                if eid in self._completed:  # announced while its owner was being worked out: the call keeps it
                    self._completed.discard(eid)
                    await call.hooks.complete(eid)
            return await call.hooks.ask(ask)
        except Untold as exc:
            for suspect in exc.suspects:  # one of them asked: each runs alone from now on
                self._learnt(suspect, asks=True)
            raise
        finally:
            self.asking -= 1
            if not self.asking and self.on_calm is not None:
                self.on_calm()

    def _learnt(self, call: InFlight, asks: bool) -> None:
        call.asked = call.asked or asks
        if self.on_learnt is not None and call.tool:
            self.on_learnt(call.tool, asks)

    @staticmethod
    def _elicitation(params: dict[str, Any]) -> ElicitParams:
        try:
            ask = ElicitParams.model_validate(params)
        except Exception as exc:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"elicitation/create params are invalid: {exc}") from None
        if ask.mode not in (None, "form", "url"):
            raise RpcError(jsonrpc.INVALID_PARAMS, f"elicitation mode {ask.mode!r} was not declared by mcpx "
                                                   "(it declared form and url)")
        if ask.effective_mode == "url" and not ask.url:
            raise RpcError(jsonrpc.INVALID_PARAMS, "a url-mode elicitation needs url")
        return ask

    async def _on_notification(self, msg: Message) -> None:
        method = msg.get("method")
        params = msg.get("params") or {}
        hooks = self._current()
        if method == "notifications/elicitation/complete":
            eid = params.get("elicitationId")
            if isinstance(eid, str):
                owner = self._asked.get(eid)
                target = owner.hooks if owner is not None else hooks
                if target is not None:
                    await target.complete(eid)
                elif self.attribution.held and len(self._completed) < 1000:
                    self._completed.add(eid)  # its question is held: whoever it turns out to be hears it then
        elif method == "notifications/progress":
            if (owner_of := self._progress_of(params)) is not None:
                await owner_of[0].notify(method, owner_of[1])  # belongs to the call that asked for it
        elif method == "notifications/message" and hooks is not None:
            await hooks.notify(method, params)  # belongs to the call in flight: its caller hears it
        elif method == "notifications/tools/list_changed":
            self.tools = None
            if self.on_tools_changed is not None:
                await self.on_tools_changed()
        elif method == "notifications/message":
            log.info("upstream %s says: %.500s", self.name, params.get("data"))
        else:
            uri = params.get("uri") if method == "notifications/resources/updated" else None
            for listener in list(self._listeners.values()):
                if uri is None or uri in listener.uris:
                    await listener.relay(msg)

    # ---- clients that listen (one server passed through)

    def listen(self, client: object, relay: Callable[[Message], Awaitable[None]]) -> None:
        """`client` hears this instance's notifications (its subscriptions' resources/updated, the list changes)
        until `unlisten`. Keyed by the client: one forwarding after another replaces nobody."""
        known = self._listeners.get(client)
        self._listeners[client] = _Listener(relay, known.uris if known is not None else set())

    def subscribed(self, client: object, uri: str, on: bool) -> None:
        """`client` subscribed to (or unsubscribed from) `uri` on this instance: its resources/updated go to it."""
        listener = self._listeners.get(client)
        if listener is not None:
            (listener.uris.add if on else listener.uris.discard)(uri)

    def unlisten(self, client: object) -> None:
        self._listeners.pop(client, None)


@dataclass
class _Listener:
    relay: Callable[[Message], Awaitable[None]]
    uris: set[str]


async def open_connection(name: str, entry: ServerConfig, session: str, era_hint: Era | None,
                          declared: dict[str, Any] | None = None) -> UpstreamConnection:
    conn = UpstreamConnection(name, entry, session, declared)
    await conn.open(era_hint)
    return conn

